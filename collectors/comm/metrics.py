"""Latency statistics and nccl-tests' bandwidth formulas (doc/PERFORMANCE.md). Pure Python."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.core.stats import percentile

# busbw = algbw x factor(n): what each rank's link really carried, comparable to hardware peak.
_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' correction factor for ``op`` (one of sizes.OPS) over ``world`` ranks."""
    return _FACTORS[op](world)


def algbw_gbps(nbytes: int, time_us: float) -> float | None:
    """size / time in GB/s (1e9 B/s), as nccl-tests prints it."""
    return nbytes / (time_us * 1e3) if time_us is not None and time_us > 0 else None


def busbw_gbps(op: str, nbytes: int, time_us: float, world: int) -> float | None:
    alg = algbw_gbps(nbytes, time_us)
    return None if alg is None else alg * bus_factor(op, world)


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
    """A collective is done when its slowest rank is: per iteration, the max over ranks.
    Our per-call percentiles come from these; nccl-tests reports something else
    (``ranks_mean``)."""
    return [max(column) for column in zip(*per_rank, strict=True)]


def ranks_mean(burst_us: list[float]) -> float:
    """nccl-tests' reported time: each rank's burst mean (one timer around ``iters`` calls,
    divided by ``iters``), then averaged over ranks (``Allreduce(args, &deltaSec, average)``
    with the default ``-a 1``: NVIDIA/nccl-tests v2.13+, src/common.cu ``BenchTime``)."""
    return sum(burst_us) / len(burst_us)
