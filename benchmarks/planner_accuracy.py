"""Serving-model accuracy on the measured Blackwell fixture, and `predict`'s speed.

    .venv/bin/python benchmarks/planner_accuracy.py [--no-lomo] [--repeat 50]

Runs the serving model (what ``python -m planner predict`` answers) over every filtered row of
``../shared/fixtures/serving/aic_silicon_blackwell_agg.csv`` with the recorded constants and
prints median |TPOT error| overall, per model, per engine and per concurrency band, then the
leave-one-model-out figure on the vLLM rows (refit without each model, score it), then the
time of one ``predict`` answer for 10 concurrencies. Results: docs/benchmarks.md.
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

from planner import fit, fixture  # noqa: E402
from planner.predict import build_parser, run  # noqa: E402
from planner.serving_params import FITTED  # noqa: E402

BANDS = ((1, 8), (9, 32), (33, 128), (129, 100_000))


def table(title: str, errs: list[tuple], key) -> None:
    by: dict[str, list[float]] = defaultdict(list)
    for r, e, te in errs:
        by[key(r)].append((e, te))
    print(f"\n| {title} | rows | median abs TPOT err | within 25% | median signed | "
          "median abs TTFT err |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for k in sorted(by):
        e = np.array([x[0] for x in by[k]])
        t = np.array([x[1] for x in by[k] if x[1] == x[1]])
        print(f"| {k} | {e.size} | {np.median(np.abs(e)):.1%} | {np.mean(np.abs(e) <= 0.25):.0%}"
              f" | {np.median(e):+.1%} | {np.median(np.abs(t)) if t.size else float('nan'):.0%} |")  # fmt: skip


def band(c: int) -> str:
    lo, hi = next(b for b in BANDS if b[0] <= c <= b[1])
    return f"c {lo}-{hi}" if hi < 100_000 else f"c >= {lo}"


def speed(repeat: int) -> None:
    args = build_parser().parse_args(
        ["--model", "deepseek-v3", "--host", "h200-sxm-8x", "--tp", "8", "--isl", "1024",
         "--osl", "1024", "--concurrency", "1,2,4,8,16,32,64,128,256,512", "--json"])  # fmt: skip
    run(args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(args)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(f"\npredict, 10 concurrencies (deepseek-v3 @ h200-sxm-8x TP=8, policy check included):"
          f" median {statistics.median(times):.2f} ms, p90 {times[int(0.9 * (repeat - 1))]:.2f} ms"
          " (target <= 50 ms)")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-lomo", action="store_true")
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    rows, dropped = fixture.load_rows()
    print(f"rows kept {len(rows)}; dropped {dropped}")
    errs = fit.errors(fit.groups(rows), FITTED)
    print(f"rows the model refuses (does not fit in memory): {len(rows) - len(errs)}")
    table("engine", errs, lambda r: r.engine)
    table("engine / model / format", errs, lambda r: f"{r.engine} {r.model_path} {r.quant}")
    table("engine / concurrency band", errs, lambda r: f"{r.engine} {band(r.concurrency)}")
    table("all rows", errs, lambda r: "all")
    if not args.no_lomo:
        lomo = fit.lomo(rows)
        table("vLLM leave-one-model-out, per held-out model", lomo, lambda r: r.model_path)
        s = fit.summary(lomo)
        print(f"\nleave-one-model-out (vLLM): median |TPOT err| {s['median_abs_tpot_err']:.1%}, "
              f"{s['within_25pct']:.0%} of {s['rows']} rows within 25% "
              "(target <= 15%, >= 75%)")  # fmt: skip
    speed(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
