"""Small numpy helpers for the trace analysis."""

from __future__ import annotations

import numpy as np


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for arrays without NaN, without importing ``numpy.ma``.

    numpy 2.x's ``np.unique`` without index/inverse/count outputs asks
    ``np.ma.is_masked``, whose first use imports ``numpy.ma`` (~25 ms, a tenth of a small
    trace's import); a sort and a neighbour comparison give the same result.
    """
    flat = np.sort(np.asarray(values).ravel())
    if len(flat) < 2:
        return flat
    keep = np.empty(len(flat), dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


def groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True, return_counts=True)`` of integer keys (the
    inverse flat, int32 where the keys are few).

    Few distinct non-negative keys (at most 4 per element's worth of range) are counted,
    not sorted: the sort's copies cost ~32 bytes per element, ~0.3 GB on a
    10-million-kernel rank (docs/benchmarks.md, Import memory); the counting 4.
    """
    n = len(key)
    if n and int(key.min()) >= 0 and (top := int(key.max())) < max(4 * n, 1 << 16):
        calls = np.bincount(key, minlength=top + 1)
        uniq = np.flatnonzero(calls)
        index = np.zeros(top + 1, dtype=np.int32)
        index[uniq] = np.arange(len(uniq), dtype=np.int32)
        return uniq.astype(key.dtype, copy=False), index[key], calls[uniq]
    uniq, inverse, calls = np.unique(key, return_inverse=True, return_counts=True)
    return uniq, inverse.reshape(-1), calls


def distinct_per_group(group: np.ndarray, value: np.ndarray, n_groups: int) -> np.ndarray:
    """How many distinct values (non-negative integers) each group 0..n_groups-1 holds."""
    width = max(int(value.max(initial=-1)) + 1, 1)
    if n_groups * width <= max(4 * len(value), 1 << 16):  # a bitmap of the (group, value) pairs
        seen = np.zeros(n_groups * width, dtype=bool)
        for lo in range(0, len(value), 1 << 20):
            seen[group[lo : lo + (1 << 20)].astype(np.int64) * width
                 + value[lo : lo + (1 << 20)]] = True  # fmt: skip
        return seen.reshape(n_groups, width).sum(axis=1)
    pairs = unique_sorted(group.astype(np.int64) * width + value)
    return np.bincount(pairs // width, minlength=n_groups)
