"""Planner speed: every layout over concurrency 1..512, from scratch and on a rerun.

    .venv/bin/python benchmarks/planner_bench.py [--repeat 5]

Each timed call is what the Tradeoff page does: load the policy file, predict every default
layout with the serving model at every concurrency 1..512 (1024 in / 1024 out; simulated at
1..8 and every power of two above, interpolated between), with bands, check the policy, rank, find
crossovers and close calls, and (for the reference case) calibrate. "cold": the schedules
simulated afresh (a new process, or a new workload); "warm": a rerun of the same workload
(another layout choice, view or concurrency), whose schedules are kept. CPU seconds beside
wall seconds: on a shared box the wall clock mostly measures the other processes.
"""

from __future__ import annotations

import argparse
import platform
import resource
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


def one(model: str, host: str, ref: bool, cold: bool = True) -> tuple[float, int, float]:
    """(wall ms, layouts, CPU ms) of one plan."""
    routing.clear_cache()
    if cold:
        simulate.cache_clear()
    m, hw = models.preset(model), hardware.preset(host)
    t0, c0 = time.perf_counter(), time.process_time()
    res = plan(m, hw, concurrencies=range(1, 513), **(reference.plan_kwargs() if ref else {}))
    return (time.perf_counter() - t0) * 1e3, len(res.layouts), (time.process_time() - c0) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    print("| case | layouts | points | cold median ms (CPU) | warm median ms (CPU) |")
    print("|---|---|---|---|---|")
    for name, model, host, ref in CASES:
        one(model, host, ref)  # warm imports
        cold = [one(model, host, ref) for _ in range(args.repeat)]
        warm = [one(model, host, ref, cold=False) for _ in range(args.repeat)]
        n = warm[0][1]

        def med(xs: list, i: int) -> float:
            return statistics.median(x[i] for x in xs)

        print(f"| {name} | {n} | {n * 512} | {med(cold, 0):.0f} ({med(cold, 2):.0f}) | "
              f"{med(warm, 0):.0f} ({med(warm, 2):.0f}) |")  # fmt: skip
    walls, cpus = [], []
    for _ in range(args.repeat):  # the interactive target: a fresh process
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "planner", *CLI], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls.append(time.perf_counter() - t0)
        cpus.append(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
    print(f"\npython -m planner {' '.join(CLI)}: median {statistics.median(walls):.2f} s wall, "
          f"{statistics.median(cpus):.2f} s CPU (min wall {min(walls):.2f} s; target <= 1.5 s "
          f"wall)")  # fmt: skip
    return 0


CLI = ["--model", "deepseek-v3", "--host", "h200-sxm-8x", "--json"]
ROOT = Path(__file__).resolve().parents[1]


if __name__ == "__main__":
    raise SystemExit(main())
