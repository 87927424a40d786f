"""Latency statistics and nccl-tests' bandwidth formulas (doc/PERFORMANCE.md). Pure Python."""

from __future__ import annotations

import math
from dataclasses import dataclass

# busbw = algbw x factor(n): what each rank's link really carried, comparable to hardware peak.
_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def bus_factor(op: str, world: int) -> float | None:
    """nccl-tests' correction factor for ``op`` over ``world`` ranks; None if it has none."""
    f = _FACTORS.get(op)
    return None if f is None or world < 1 else f(world)


def algbw_gbps(nbytes: int, time_us: float) -> float | None:
    """size / time in GB/s (1e9 B/s), as nccl-tests prints it."""
    if time_us is None or time_us <= 0:
        return None
    return nbytes / (time_us * 1e3)


def busbw_gbps(op: str, nbytes: int, time_us: float, world: int) -> float | None:
    alg, factor = algbw_gbps(nbytes, time_us), bus_factor(op, world)
    return None if alg is None or factor is None else alg * factor


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of an ascending list."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class LatencyStats:
    iters: int
    p50_us: float
    p10_us: float
    p90_us: float
    min_us: float
    mean_us: float


def latency_stats(times_us: list[float]) -> LatencyStats:
    values = sorted(times_us)
    return LatencyStats(
        iters=len(values),
        p50_us=percentile(values, 50),
        p10_us=percentile(values, 10),
        p90_us=percentile(values, 90),
        min_us=values[0],
        mean_us=sum(values) / len(values),
    )


def slowest_rank_per_iter(per_rank: list[list[float]]) -> list[float]:
    """A collective is done when its slowest rank is: per iteration, the max over ranks
    (as nccl-tests' per-iteration report does)."""
    return [max(column) for column in zip(*per_rank, strict=True)]
