"""Serving-model accuracy on the measured Blackwell fixture: in-sample and held out.

    .venv/bin/python benchmarks/planner_accuracy.py [--no-holdout] [--repeat 20]

Runs the one serving model (what ``python -m planner`` and ``predict`` answer: the benchmark
simulated on each engine's scheduler, every step priced by the cost model) over every
filtered row of ``../shared/fixtures/serving/aic_silicon_blackwell_agg.csv`` and prints per
engine and per engine x concurrency class (<= 8, 9-32, 33-128, > 128) the median |error| and
signed median error of TPOT and TTFT: in-sample with the recorded constants, then
leave-one-model-out (every parameter refitted without the model) and leave-one-GPU-out.
Then, held out by model: the sweep target (a TPOT target set at each sweep's middle
concurrency: is the predicted highest concurrency meeting it the measured one?), the rows
whose TTFT shows requests waiting (measured TTFT over 10x one prompt's prefill), and the
time of one ``predict`` answer for 10 concurrencies. Results: docs/benchmarks.md.
Skips with a reason when the fixture is absent.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitting import fit, fixture, holdout  # noqa: E402
from planner.cost import serving, serving_means  # noqa: E402
from planner.cost.params import FITTED  # noqa: E402
from planner.predict import build_parser, run  # noqa: E402

TARGETS = ("targets: TPOT median |error| <= 8% per engine held out, no engine x class of 20+ "
           "rows beyond +-8% signed; TTFT <= 25% per engine; sweep target >= 60%")  # fmt: skip
CLASSES = ((8, "<=8"), (32, "9-32"), (128, "33-128"), (1 << 30, ">128"))


def klass(c: int) -> str:
    return next(name for top, name in CLASSES if c <= top)


def table(title: str, errs: list[tuple], key) -> None:
    by: dict[str, list[tuple]] = defaultdict(list)
    for r, e, te in errs:
        by[key(r)].append((e, te))
    print(f"\n| {title} | rows | TPOT median abs | TPOT signed | within 25% | TTFT median abs "
          "| TTFT signed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for k in sorted(by, key=_order):
        e = np.array([x[0] for x in by[k]])
        t = np.array([x[1] for x in by[k] if x[1] == x[1]])
        ttft = f"{np.median(np.abs(t)):.0%} | {np.median(t):+.0%}" if t.size else "- | -"
        print(f"| {k} | {e.size} | {np.median(np.abs(e)):.1%} | {np.median(e):+.1%} | "
              f"{np.mean(np.abs(e) <= 0.25):.0%} | {ttft} |")  # fmt: skip


def _order(k: str):
    names = [n for _, n in CLASSES]
    head, _, tail = k.partition(" ")
    return (head, names.index(tail) if tail in names else -1, k)


def sweep_targets(errs: list[tuple]) -> tuple[int, int]:
    """Sweeps (one engine, model, format, GPU, layout and workload, 3+ concurrencies): a
    target at the middle concurrency's measured TPOT; (sweeps where the highest concurrency
    whose predicted TPOT meets it is the measured one, sweeps)."""
    by: dict[tuple, list[tuple]] = defaultdict(list)
    for r, e, _ in errs:
        by[(r.engine, r.model_path, r.quant, r.system, r.layout, r.isl, r.osl)].append((r, e))
    hit = n = 0
    for pts in by.values():
        pts = sorted(pts, key=lambda x: x[0].concurrency)
        cs = [r.concurrency for r, _ in pts]
        if len(set(cs)) != len(cs) or len(cs) < 3:
            continue  # repeats of one point: no single sweep
        target = pts[len(pts) // 2][0].tpot_ms
        measured = max(r.concurrency for r, _ in pts if r.tpot_ms <= target)
        meets = [r.concurrency for r, e in pts if r.tpot_ms * (1 + e) <= target]
        n += 1
        hit += bool(meets) and max(meets) == measured
    return hit, n


def waiting_rows(errs: list[tuple], rows: list[fixture.Row]) -> None:
    """Rows whose measured TTFT is over 10x one prompt's prefill alone (the model's TTFT at
    one client, less the request path): is the wait predicted in TTFT, and TPOT unbiased?"""
    alone: dict[tuple, float] = {}
    for g in fit.groups(rows):
        try:
            one = serving_means.mean_latencies(g.model, g.host, g.rows[0].layout, g.workload,
                                         np.array([1.0]))[1][0]  # fmt: skip
        except Exception:  # noqa: BLE001 - the model cannot run it: not counted
            continue
        path = FITTED.ttft_fixed_ms.get(g.workload.engine, 0.0)
        for r in g.rows:
            alone[r.id] = one - path
    tp, tf, seen = [], [], 0
    for r, e, te in errs:
        prefill = alone.get(r.id)
        if prefill is None or te != te or r.ttft_ms <= 10 * prefill:
            continue
        tp.append(e)
        tf.append(te)
        seen += r.ttft_ms * (1 + te) > 10 * prefill
    if tp:
        print(f"\nrows whose TTFT shows waiting (> 10x one prompt's prefill): {len(tp)}; TPOT "
              f"signed median {np.median(tp):+.1%} (median |error| {np.median(np.abs(tp)):.1%}); "
              f"TTFT signed median {np.median(tf):+.1%}; predicted TTFT also > 10x the prefill "
              f"in {seen} of {len(tp)}")  # fmt: skip


def _fmt(r) -> str:
    return f"{r.engine} {r.model_path} {holdout.FORMATS.get(r.quant, r.quant)}"


def speed(repeat: int) -> None:
    args = build_parser().parse_args(
        ["--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl", "1024",
         "--osl", "1024", "--concurrency", "1,2,4,8,16,32,64,128,256,512", "--json"])  # fmt: skip
    times, cpu = [], []
    for _ in range(repeat):
        serving.simulate.cache_clear()  # a fresh process simulates every point
        t0, c0 = time.perf_counter(), time.process_time()
        run(args)
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    times.sort()
    print(f"\npredict, 10 concurrencies (deepseek-v3 @ b200-sxm-8x TP=8, simulated afresh, "
          f"policy check and band included): median {statistics.median(times):.0f} ms wall, "
          f"{statistics.median(cpu):.0f} ms CPU; p90 {times[int(0.9 * (repeat - 1))]:.0f} ms "
          f"wall (target <= 500 ms)")  # fmt: skip


def report(title: str, errs: list[tuple]) -> None:
    table(f"{title}: engine", errs, lambda r: r.engine)
    table(f"{title}: engine x concurrency", errs, lambda r: f"{r.engine} {klass(r.concurrency)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-holdout", action="store_true", help="in-sample only (about a minute)")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    if not fixture.CSV.is_file():
        print(f"skipped: {fixture.CSV} absent (the fit's measured rows live only there)")
        return 0
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    rows, dropped = fixture.load_rows()
    print(f"rows kept {len(rows)}; dropped {dropped}")
    errs = fit.errors(fit.groups(rows), FITTED)
    print(f"rows the model refuses (do not fit at the engine's default memory rule): "
          f"{len(rows) - len(errs)}")  # fmt: skip
    report("in-sample", errs)
    table("in-sample: engine / model / format", errs, _fmt)
    if not args.no_holdout:
        lomo = fit.lomo(rows)
        report("leave-one-model-out", lomo)
        table("leave-one-model-out: engine / model / format", lomo, _fmt)
        hit, n = sweep_targets(lomo)
        print(f"\nsweep target (middle concurrency's measured TPOT; model held out): the "
              f"predicted highest concurrency meeting it is the measured one in {hit} of {n} "
              f"sweeps ({hit / max(n, 1):.0%})")  # fmt: skip
        waiting_rows(lomo, rows)
        logo = fit.logo(rows)
        report("leave-one-GPU-out", logo)
        table("leave-one-GPU-out: held-out system", logo, lambda r: f"{r.engine} {r.system}")
        print(TARGETS)
    speed(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
