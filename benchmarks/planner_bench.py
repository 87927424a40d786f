"""Planner speed: recompute every layout over concurrency 1..512 (target <= 50 ms).

    .venv/bin/python benchmarks/planner_bench.py [--repeat 30]

Each timed call is what the Tradeoff page does on every rerun: load the policy file, predict
every default layout with the serving model at every concurrency 1..512 (1024 in / 1024
out), with bands, check the policy, rank, find crossovers and close calls, and (for the
reference case) calibrate. Memo caches are cleared before every call.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.api import plan  # noqa: E402
from planner.cost import routing
from planner.specs import hardware, models  # noqa: E402
from planner.tradeoff import reference

CASES = [
    ("reference-kimi-k25-rtxpro6000", reference.MODEL, reference.HOST, True),
    ("kimi-k2.5 @ h200-sxm-8x", "kimi-k2.5", "h200-sxm-8x", False),
    ("deepseek-v3 @ h100-sxm-8x", "deepseek-v3", "h100-sxm-8x", False),
    ("minimax-m2.5 @ rtx-pro-6000-pcie-8x", "minimax-m2.5", "rtx-pro-6000-pcie-8x", False),
]


def one(model: str, host: str, ref: bool) -> tuple[float, int]:
    routing.clear_cache()
    m, hw = models.preset(model), hardware.preset(host)
    t0 = time.perf_counter()
    res = plan(m, hw, concurrencies=range(1, 513), **(reference.plan_kwargs() if ref else {}))
    return (time.perf_counter() - t0) * 1e3, len(res.layouts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    print("| case | layouts | points | median ms | p90 ms |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for name, model, host, ref in CASES:
        one(model, host, ref)  # warm imports
        times = []
        for _ in range(args.repeat):
            ms, n = one(model, host, ref)
            times.append(ms)
        times.sort()
        med, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
        worst = max(worst, med)
        print(f"| {name} | {n} | {n * 512} | {med:.1f} | {p90:.1f} |")
    print(f"worst median {worst:.1f} ms (target <= 50 ms): {'ok' if worst <= 50 else 'SLOW'}")
    return 0 if worst <= 50 else 1


if __name__ == "__main__":
    raise SystemExit(main())
