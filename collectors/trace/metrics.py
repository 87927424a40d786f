"""Interval arithmetic on numpy arrays: unions, coverage inside windows, exposed time.

All functions take start/end arrays in microseconds and never loop per interval in
Python, so a rank with millions of kernels costs a few sorts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collectors.trace.npx import unique_sorted

# elements per slice of the chunked functions: their work arrays stay a few MB on any rank
_CHUNK = 1 << 18
_SLICE = 1 << 18  # a + b intervals per slice of ``uncovered`` (~100 bytes each in difference)


@dataclass(frozen=True)
class Intervals:
    """Sorted, disjoint intervals with a running sum of their lengths."""

    start: np.ndarray
    end: np.ndarray
    before: np.ndarray  # before[i] = total length of intervals 0..i-1

    @property
    def total(self) -> float:
        return float(self.before[-1] + (self.end[-1] - self.start[-1])) if len(self.start) else 0.0

    @property
    def span(self) -> float:
        """From the first start to the last end."""
        return float(self.end[-1] - self.start[0]) if len(self.start) else 0.0

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
    """Merge possibly overlapping intervals into sorted disjoint ones (``end >= start``)."""
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
    # merged intervals start at the first start and at each start past every earlier end;
    # one ends where the next starts, at the running end (its own events' largest end:
    # each of them ends after every earlier interval did). Masks, not index arrays: a
    # 10-million-event rank's union costs one byte per event besides its result.
    first = np.empty(len(s), dtype=bool)
    first[0] = True
    np.greater(s[1:], run_end[:-1], out=first[1:])
    last = np.empty(len(s), dtype=bool)
    last[-1] = True
    last[:-1] = first[1:]
    ms = s[first]
    del first
    me = run_end[last]
    del run_end, last
    before = np.empty(len(ms))
    before[0] = 0.0
    np.subtract(me[:-1], ms[:-1], out=before[1:])
    np.cumsum(before[1:], out=before[1:])  # in place: add.accumulate reads i before it writes i
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
    return times_of(busy.total, busy.span, comm, compute)


def times_of(busy_us: float, span_us: float, comm: Intervals, compute: Intervals) -> RankTimes:
    """``rank_times`` from the busy union's length and span (the union itself may be gone)."""
    return RankTimes(busy_us, max(span_us - busy_us, 0.0), span_us, comm.total,
                     uncovered(comm, compute))  # fmt: skip


def uncovered(a: Intervals, b: Intervals) -> float:
    """``difference(a, b).total``, taken a slice of time at a time: each slice ends
    between two of ``a``'s intervals (disjoint, never touching), so it holds whole pieces
    of the difference, the same ones, summed in the same order. One ``difference`` of a
    10-million-event rank at once holds ~100 bytes per event (docs/benchmarks.md)."""
    if not len(a.start) or not len(b.start):
        return a.total
    # cost of the slices ending after each of a's intervals: a's intervals + b's begun
    cost = np.arange(1, len(a.start) + 1) + np.searchsorted(b.start, a.end, side="right")
    cuts = np.searchsorted(cost, np.arange(_SLICE, int(cost[-1]), _SLICE), side="right")
    del cost
    lengths = []
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(a.start)], strict=True):
        if lo >= hi:
            continue
        part = Intervals(a.start[lo:hi], a.end[lo:hi], a.before[lo:hi])
        first = np.searchsorted(b.end, part.start[0], side="left")  # b's that reach the slice
        last = np.searchsorted(b.start, part.end[-1], side="right")
        piece = difference(part, Intervals(b.start[first:last], b.end[first:last],
                                           b.before[first:last]))  # fmt: skip
        lengths.append(piece.end - piece.start)
    joined = np.concatenate(lengths)
    return float(np.cumsum(joined)[-1]) if len(joined) else 0.0


def containing(
    starts: np.ndarray, ends: np.ndarray, labels: np.ndarray, t: np.ndarray, depth: int = 4,
    dtype: type[np.signedinteger] = np.int64,
) -> np.ndarray:
    """For each time t, the label (as ``dtype``) of the innermost interval containing it,
    else -1.

    ``starts`` must be sorted; nesting deeper than ``depth`` falls back to outer ones. The
    times are taken a slice at a time: the search's work arrays stay a few MB whatever
    the rank's size.
    """
    out = np.full(len(t), -1, dtype=dtype)
    if not len(starts) or not len(t):
        return out
    for lo in range(0, len(t), _CHUNK):
        out[lo : lo + _CHUNK] = _containing(starts, ends, labels, t[lo : lo + _CHUNK], depth)
    return out



def _containing(starts: np.ndarray, ends: np.ndarray, labels: np.ndarray, t: np.ndarray,
                depth: int) -> np.ndarray:  # fmt: skip
    out = np.full(len(t), -1, dtype=np.int64)
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
