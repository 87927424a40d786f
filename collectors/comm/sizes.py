"""Sweep points for ``comm``: serving sizes (tokens x hidden x dtype) or nccl-tests byte sweeps.

Pure Python (no torch), so the CLI parses and checks flags before any rank starts.

``bytes`` follows nccl-tests' ``size`` column for every op, so a ``comm`` curve and an
imported nccl-tests curve share one axis:

- all_reduce: the buffer each rank reduces (in place); T tokens -> T x hidden x dtype bytes.
- all_to_all: each rank's whole send buffer; T tokens per GPU means T tokens' activations
  go to EVERY destination (the reference case's "14,336 B per destination" at 1 token),
  so bytes = world_size x T x hidden x dtype.
- all_gather: the gathered output (world_size x each rank's T x hidden x dtype part).
- reduce_scatter: the full input that is reduced and scattered, so each rank keeps its own
  T tokens: world_size x T x hidden x dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors.core.errors import InputError

OPS = ("all_reduce", "all_to_all", "all_gather", "reduce_scatter")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# Ops whose nccl-tests size is the whole array over all ranks (each rank owns size/n).
SPLIT_OPS = frozenset({"all_to_all", "all_gather", "reduce_scatter"})
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class Point:
    """One measured size of one op, in nccl-tests' terms: ``bytes`` is its ``size`` column and
    ``count`` its ``count`` column (elements per rank: the whole buffer for all_reduce, each
    rank's part for all_gather/reduce_scatter, one destination's part for all_to_all)."""

    op: str
    tokens_per_rank: int | None
    bytes: int
    count: int


def parse_ops(text: str) -> list[str]:
    ops = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad or not ops:
        raise InputError(f"--ops: unknown op {', '.join(bad) or '(none)'}; choose from "
                         f"{', '.join(OPS)}")  # fmt: skip
    return list(dict.fromkeys(ops))


def parse_tokens(text: str) -> list[int]:
    try:
        tokens = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--tokens: {text!r} is not a comma list of integers") from None
    if not tokens or any(t <= 0 for t in tokens):
        raise InputError(f"--tokens: {text!r} needs positive token counts, e.g. 1,2,4,8")
    return sorted(set(tokens))


def parse_size(text: str) -> int:
    """``8``, ``64K``, ``1M``, ``1G`` (binary units, as nccl-tests' -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text, re.IGNORECASE)
    if not m:
        raise InputError(f"--bytes: {text!r} is not a size like 8, 64K, 1M or 1G")
    return int(m[1]) * _UNITS[m[2].upper()]


def parse_bytes(text: str) -> list[int]:
    """``MIN:MAX:xF`` (multiply), ``MIN:MAX:+STEP`` (add) or a comma list of sizes."""
    if ":" not in text:
        sizes = [parse_size(s) for s in text.split(",") if s.strip()]
    else:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise InputError(f"--bytes: {text!r} is not MIN:MAX[:xF|:+STEP]")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        step = parts[2].strip() if len(parts) == 3 else "x2"
        if hi < lo or lo <= 0:
            raise InputError(f"--bytes: {text!r} needs 0 < MIN <= MAX")
        m = re.fullmatch(r"([x+*])(\d+)([KMG]?)", step, re.IGNORECASE)
        if not m or int(m[2]) <= 0 or (m[1] in "x*" and int(m[2]) < 2):
            raise InputError(f"--bytes: step {step!r} must be xF (F >= 2) or +STEP")
        sizes, size = [], lo
        while size <= hi:
            sizes.append(size)
            size = size * int(m[2]) if m[1] in "x*" else size + parse_size(m[2] + m[3])
    if not sizes or len(sizes) > 64:
        raise InputError(f"--bytes: {text!r} gives {len(sizes)} sizes (1 to 64 allowed)")
    return sorted(set(sizes))


def token_point(op: str, tokens: int, hidden: int, dtype_bytes: int, world: int) -> Point:
    count = tokens * hidden  # elements one rank contributes / keeps / sends per destination
    total = count * world if op in SPLIT_OPS else count
    return Point(op, tokens, total * dtype_bytes, count)


def byte_point(op: str, size: int, dtype_bytes: int, world: int) -> Point | None:
    """As nccl-tests: count = size / dtype, rounded down to a multiple of the world for
    split ops; None when that leaves nothing to send."""
    total = size // dtype_bytes
    if op in SPLIT_OPS:
        total = total // world * world
    if total <= 0:
        return None
    return Point(op, None, total * dtype_bytes, total // world if op in SPLIT_OPS else total)


def sweep(
    ops: list[str],
    tokens: list[int],
    sizes: list[int],
    hidden: int,
    dtype: str,
    world: int,
) -> list[Point]:
    """Every (op, size) point, tokens first then bytes, smallest first within each op."""
    dbytes = DTYPE_BYTES[dtype]
    points: list[Point] = []
    for op in ops:
        points += [token_point(op, t, hidden, dbytes, world) for t in tokens]
        points += [p for s in sizes if (p := byte_point(op, s, dbytes, world))]
    return points
