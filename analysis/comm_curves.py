"""Collective latency curves: where latency stops being flat (the cliff), and axis mapping.

Small collectives cost a fixed latency whatever their size; past some size latency climbs
with the bytes. The reference case's PCIe-only host ran All-to-All in 19-25 us at 1 token
per GPU and 1007 us at 16: that jump is the cliff a serving layout must stay left of.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_RISE = 2.0  # latency at least this many times the flat level counts as climbing
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8": 1, "int8": 1, "uint8": 1}
SPLIT_OPS = frozenset({"all_to_all", "all_gather", "reduce_scatter"})


@dataclass(frozen=True)
class Cliff:
    x: float  # first size past the flat region
    latency_us: float  # latency there
    last_flat_x: float  # largest size still on the flat level
    flat_us: float  # the flat level: median latency of the flat region
    ratio: float  # latency_us / flat_us

    def describe(self, unit: str) -> str:
        return (f"cliff at {self.x:g} {unit}: {self.latency_us:.0f} us, {self.ratio:.1f}x the "
                f"flat {self.flat_us:.0f} us (flat up to {self.last_flat_x:g} {unit})")  # fmt: skip


def find_cliff(
    xs: Sequence[float], latencies_us: Sequence[float], rise: float = DEFAULT_RISE
) -> Cliff | None:
    """The first size from which latency stays above ``rise`` x the flat level.

    The flat level before point i is the lowest latency seen so far, so a single slow
    sample (a noisy host) neither starts the cliff early nor raises the level: a point
    counts only if every larger size stays above the threshold too. None when the curve
    never leaves its flat level or has fewer than 3 positive points.
    """
    pts = sorted((x, y) for x, y in zip(xs, latencies_us, strict=True)
                 if x and x > 0 and y is not None and y > 0)  # fmt: skip
    if len(pts) < 3:
        return None
    for i in range(1, len(pts)):
        floor = min(y for _, y in pts[:i])
        threshold = rise * floor
        if all(y > threshold for _, y in pts[i:]):
            flat = statistics.median(y for _, y in pts[:i])
            x, y = pts[i]
            return Cliff(x, y, pts[i - 1][0], flat, y / flat)
    return None


def tokens_equivalent(
    op: str, nbytes: float, world_size: int | None, hidden: int, dtype: str
) -> float | None:
    """Tokens per GPU a byte size stands for (inverse of ``comm``'s --tokens sizing).

    nccl-tests' size is the per-rank buffer for all_reduce and the whole array over all
    ranks for all_to_all/all_gather/reduce_scatter. None when it cannot be mapped.
    """
    width = DTYPE_BYTES.get(dtype)
    if not width or hidden <= 0 or nbytes is None or nbytes <= 0:
        return None
    per_rank = nbytes
    if op in SPLIT_OPS:
        if not world_size:
            return None
        per_rank = nbytes / world_size
    elif op != "all_reduce":
        return None
    return per_rank / (hidden * width)
