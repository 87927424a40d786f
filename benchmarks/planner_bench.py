"""Planner speed: every layout over concurrency 1..512, from scratch and on a rerun.

    .venv/bin/python benchmarks/planner_bench.py [--repeat 5]

Each timed call is what the Tradeoff page does: load the policy file, predict every default
layout with the serving model at every concurrency 1..512 (1024 in / 1024 out; simulated at
every power of two, interpolated between), with bands, check the policy, rank, find
crossovers and close calls, and (for the reference case) calibrate. "cold": the schedules
simulated afresh (a new process, or a new workload); "warm": a rerun of the same workload
(another layout choice, view or concurrency), whose schedules are kept.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.api import plan  # noqa: E402
from planner.cost import routing  # noqa: E402
from planner.sched import simulate  # noqa: E402
from planner.specs import hardware, models  # noqa: E402
from planner.tradeoff import reference

CASES = [
    ("reference-kimi-k25-rtxpro6000", reference.MODEL, reference.HOST, True),
    ("kimi-k2.5 @ h200-sxm-8x", "kimi-k2.5", "h200-sxm-8x", False),
    ("deepseek-v3 @ h100-sxm-8x", "deepseek-v3", "h100-sxm-8x", False),
    ("minimax-m2.5 @ rtx-pro-6000-pcie-8x", "minimax-m2.5", "rtx-pro-6000-pcie-8x", False),
]


def one(model: str, host: str, ref: bool, cold: bool = True) -> tuple[float, int]:
    routing.clear_cache()
    if cold:
        simulate.cache_clear()
    m, hw = models.preset(model), hardware.preset(host)
    t0 = time.perf_counter()
    res = plan(m, hw, concurrencies=range(1, 513), **(reference.plan_kwargs() if ref else {}))
    return (time.perf_counter() - t0) * 1e3, len(res.layouts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    print("| case | layouts | points | cold median ms | warm median ms |")
    print("|---|---|---|---|---|")
    for name, model, host, ref in CASES:
        one(model, host, ref)  # warm imports
        cold = sorted(one(model, host, ref)[0] for _ in range(args.repeat))
        warm = sorted(one(model, host, ref, cold=False)[0] for _ in range(args.repeat))
        n = one(model, host, ref, cold=False)[1]
        print(f"| {name} | {n} | {n * 512} | {statistics.median(cold):.0f} | "
              f"{statistics.median(warm):.0f} |")  # fmt: skip
    walls = []
    for _ in range(args.repeat):  # the interactive target: a fresh process
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "planner", *CLI], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        walls.append(time.perf_counter() - t0)
    print(f"\npython -m planner {' '.join(CLI)}: median {statistics.median(walls):.2f} s wall "
          f"(min {min(walls):.2f} s; target <= 1.5 s)")  # fmt: skip
    return 0


CLI = ["--model", "deepseek-v3", "--host", "h200-sxm-8x", "--json"]
ROOT = Path(__file__).resolve().parents[1]


if __name__ == "__main__":
    raise SystemExit(main())
