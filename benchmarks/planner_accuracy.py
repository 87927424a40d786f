"""Serving-model accuracy on the measured Blackwell fixture: in-sample and held out.

    .venv/bin/python benchmarks/planner_accuracy.py [--no-holdout] [--repeat 50]

Runs the one serving model (what ``python -m planner`` and ``predict`` answer) over every
filtered row of ``../shared/fixtures/serving/aic_silicon_blackwell_agg.csv`` and prints
median |TPOT error| and |TTFT error| per engine and per engine / model / format: in-sample
with the recorded constants, then leave-one-model-out (every parameter refitted without the
model, all engines) and leave-one-GPU-out (refitted without one system), then the time of
one ``predict`` answer for 10 concurrencies. Results: docs/benchmarks.md (planner section).
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
from planner.cost.params import FITTED  # noqa: E402
from planner.predict import build_parser, run  # noqa: E402

TARGETS = "held-out targets: vLLM TPOT <= 10%, SGLang / TRT-LLM TPOT <= 20%, TTFT <= 35%"


def table(title: str, errs: list[tuple], key) -> None:
    by: dict[str, list[tuple]] = defaultdict(list)
    for r, e, te in errs:
        by[key(r)].append((e, te))
    print(f"\n| {title} | rows | median abs TPOT err | within 25% | median signed TPOT | "
          "median abs TTFT err |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for k in sorted(by):
        e = np.array([x[0] for x in by[k]])
        t = np.array([x[1] for x in by[k] if x[1] == x[1]])
        ttft = f"{np.median(np.abs(t)):.0%}" if t.size else "-"
        print(f"| {k} | {e.size} | {np.median(np.abs(e)):.1%} | "
              f"{np.mean(np.abs(e) <= 0.25):.0%} | {np.median(e):+.1%} | {ttft} |")  # fmt: skip


def _fmt(r) -> str:
    return f"{r.engine} {r.model_path} {holdout.FORMATS.get(r.quant, r.quant)}"


def speed(repeat: int) -> None:
    args = build_parser().parse_args(
        ["--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl", "1024",
         "--osl", "1024", "--concurrency", "1,2,4,8,16,32,64,128,256,512", "--json"])  # fmt: skip
    run(args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(args)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(f"\npredict, 10 concurrencies (deepseek-v3 @ b200-sxm-8x TP=8, policy check and band "
          f"included): median {statistics.median(times):.2f} ms, p90 "
          f"{times[int(0.9 * (repeat - 1))]:.2f} ms (target <= 50 ms)")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-holdout", action="store_true", help="in-sample only (seconds)")
    ap.add_argument("--repeat", type=int, default=50)
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
    table("in-sample: engine", errs, lambda r: r.engine)
    table("in-sample: engine / model / format", errs, _fmt)
    if not args.no_holdout:
        lomo = fit.lomo(rows)
        table("leave-one-model-out: engine", lomo, lambda r: r.engine)
        table("leave-one-model-out: engine / model / format", lomo, _fmt)
        logo = fit.logo(rows)
        table("leave-one-GPU-out: engine", logo, lambda r: r.engine)
        table("leave-one-GPU-out: held-out system", logo, lambda r: f"{r.engine} {r.system}")
        by_model: dict[str, list[float]] = defaultdict(list)
        for r, e, _ in lomo:
            by_model[r.model_path].append(abs(e))
        ranked = sorted(((float(np.median(v)), m, len(v)) for m, v in by_model.items()),
                        reverse=True)  # fmt: skip
        print("\nmodels by leave-one-model-out median |TPOT error| (all engines): " + "; ".join(
            f"{m} {e:.1%} ({n} rows)" for e, m, n in ranked))  # fmt: skip
        print(TARGETS)
    speed(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
