"""Interval arithmetic on numpy arrays: unions, coverage inside windows, exposed time.

All functions take start/end arrays in microseconds and never loop per interval in
Python, so a rank with millions of kernels costs a few sorts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collectors.trace.npx import unique_sorted


@dataclass(frozen=True)
class Intervals:
    """Sorted, disjoint intervals with a running sum of their lengths."""

    start: np.ndarray
    end: np.ndarray
    before: np.ndarray  # before[i] = total length of intervals 0..i-1

    @property
    def total(self) -> float:
        return float(self.before[-1] + (self.end[-1] - self.start[-1])) if len(self.start) else 0.0

    def covered_upto(self, x: np.ndarray) -> np.ndarray:
        """Length of the union that lies in (-inf, x], for each x."""
        x = np.asarray(x, dtype=np.float64)
        if not len(self.start):
            return np.zeros_like(x)
        k = np.searchsorted(self.start, x, side="right") - 1
        kk = np.maximum(k, 0)
        inside = np.clip(x - self.start[kk], 0.0, self.end[kk] - self.start[kk])
        return np.where(k >= 0, self.before[kk] + inside, 0.0)

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Length of the union inside each window [a_i, b_i]."""
        return self.covered_upto(b) - self.covered_upto(a)


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into sorted disjoint ones."""
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    if not len(start):
        empty = np.zeros(0)
        return Intervals(empty, empty, empty)
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
        del order
    s, e = start, end  # sorted: a trace's events mostly come in time order, no copy then
    run_end = np.maximum.accumulate(e)
    # merged intervals start at the first start and at each start past every earlier end
    idx = np.r_[0, np.flatnonzero(s[1:] > run_end[:-1]) + 1]
    ms = s[idx]
    me = np.maximum.reduceat(e, idx)
    before = np.concatenate(([0.0], np.cumsum(me - ms)[:-1]))
    return Intervals(ms, me, before)


def difference(a: Intervals, b: Intervals) -> Intervals:
    """The parts of ``a`` not covered by ``b``."""
    if not len(a.start) or not len(b.start):
        return a
    bounds = unique_sorted(np.concatenate((a.start, a.end, b.start, b.end)))
    lo, hi = bounds[:-1], bounds[1:]
    mid = (lo + hi) / 2
    keep = _inside(a, mid) & ~_inside(b, mid)
    return union(lo[keep], hi[keep])


def _inside(iv: Intervals, x: np.ndarray) -> np.ndarray:
    k = np.searchsorted(iv.start, x, side="right") - 1
    kk = np.maximum(k, 0)
    return (k >= 0) & (x < iv.end[kk])


@dataclass(frozen=True)
class RankTimes:
    busy_us: float
    idle_us: float
    span_us: float
    comm_us: float
    exposed_comm_us: float


def rank_times(busy: Intervals, comm: Intervals, compute: Intervals) -> RankTimes:
    """The rank's figures over all its events: span from the first start to the last end,
    busy = the union's length, idle = span - busy; exposed communication = communication
    time during which no compute kernel runs."""
    span = float(busy.end[-1] - busy.start[0]) if len(busy.start) else 0.0
    return RankTimes(busy.total, max(span - busy.total, 0.0), span, comm.total,
                     difference(comm, compute).total)  # fmt: skip


def containing(
    starts: np.ndarray, ends: np.ndarray, labels: np.ndarray, t: np.ndarray, depth: int = 4
) -> np.ndarray:
    """For each time t, the label of the innermost interval containing it, else -1.

    ``starts`` must be sorted; nesting deeper than ``depth`` falls back to outer ones.
    """
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(starts) or not len(t):
        return out
    k = np.searchsorted(starts, t, side="right") - 1
    todo = np.ones(len(t), dtype=bool)
    for _ in range(depth):
        ok = todo & (k >= 0)
        kk = np.maximum(k, 0)
        hit = ok & (t <= ends[kk])
        out[hit] = labels[kk[hit]]
        todo &= ~hit
        k = k - 1
        if not todo.any():
            break
    return out
