"""Which step owns each GPU event, and each step's GPU window (its own, in every mode).

An event belongs to the step whose CPU range made the runtime call that launched it: the
correlation id leads from a kernel, memcpy or memset to its ``cudaLaunchKernel``,
``cudaMemcpyAsync``, ...; under CUDA graphs every kernel of a replay carries the id of its
``cudaGraphLaunch``, so the replay belongs to the step that launched the graph. Only an
event whose launch is unknown is placed by its GPU start: in the window of work a step
launched; a step that launched nothing known takes the events in its own
``gpu_user_annotation``, matched by time (the first one starting after the step's CPU
start, never "the k-th of that name": ``match_annotations``), and without one those
whose GPU start lies in its CPU range. An event that runs in another step's CPU range is
not that step's (the GPU runs behind the CPU): it stays outside.

A step's window runs from the first to the last GPU event it owns. Windows of one rank do
not overlap, so their walls add up to at most the rank's span: where two steps' work
interleaves (the next step's input copy starts while this step's kernels still run), the
later window starts where the earlier one ended. A step that owns no GPU event (the
profiler stopped before its kernels were collected) has no window and is left out.

The GPU annotations are never a window themselves: under CUDA graphs vLLM's are written
in reverse time order, twice per step (two streams), each ~25 ms long and starting near
the first step (/work/shared/REFERENCE.md section 6), so they say nothing about a step.
"""

from __future__ import annotations

import numpy as np

from collectors.trace.steps import Step

_CHUNK = 1 << 18  # events per slice of the chunked searches (~10 MB of work arrays)


def locate(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the window [a_i, b_i] holding each t (-1: none); windows sorted by a."""
    k = np.searchsorted(a, t, side="right") - 1
    kk = np.maximum(k, 0)
    hit = (k >= 0) & (t <= b[kk]) if len(a) else np.zeros(len(t), dtype=bool)
    return np.where(hit, kk, -1)


def _place(out: np.ndarray, rows: np.ndarray | None, a: np.ndarray, b: np.ndarray,
           t: np.ndarray) -> None:  # fmt: skip
    """out[rows] = index of the window [a, b] (NaN: none) holding t[rows], where still -1
    (``rows`` None: every row); a slice of rows at a time."""
    ok = np.flatnonzero(~np.isnan(a))
    o = ok[np.argsort(a[ok], kind="stable")]
    a, b = a[o], b[o]
    n = len(t) if rows is None else len(rows)
    for lo in range(0, n, _CHUNK):
        part = np.arange(lo, min(lo + _CHUNK, n)) if rows is None else rows[lo : lo + _CHUNK]
        got = locate(a, b, t[part])
        free = (out[part] < 0) & (got >= 0)
        out[part[free]] = o[got[free]]


def extents(n: int, step: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(n, 2) first start and last end of each step's events; NaN where it has none."""
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    for at in range(0, len(step), _CHUNK):
        part = slice(at, at + _CHUNK)
        sel = step[part] >= 0
        np.minimum.at(lo, step[part][sel], start[part][sel])
        np.maximum.at(hi, step[part][sel], end[part][sel])
    empty = ~np.isfinite(lo)
    lo[empty] = hi[empty] = np.nan
    return np.stack([lo, hi], axis=1)


def match_annotations(steps: list[Step],
                      annotations: list[tuple[str, float, float]]) -> np.ndarray:  # fmt: skip
    """(n, 2) each step's own GPU annotation, matched by time; NaN where it has none: of
    the annotations of its name, the first that starts at or after the step's CPU start
    (the GPU cannot run a step before its CPU side began). File order means nothing:
    vLLM writes them in reverse time order, and one per stream."""
    by_name: dict[str, list[tuple[float, float]]] = {}
    for name, ts, dur in annotations:
        by_name.setdefault(name, []).append((ts, ts + dur))
    spans = {name: np.array(sorted(rows)).reshape(-1, 2) for name, rows in by_name.items()}
    out = np.full((len(steps), 2), np.nan)
    for i, s in enumerate(steps):
        cand = spans.get(s.name)
        if cand is None:
            continue
        k = int(np.searchsorted(cand[:, 0], s.cpu_start, side="left"))
        if k < len(cand):
            out[i] = cand[k]
    return out


def assign(steps: list[Step], when: np.ndarray | None, start: np.ndarray, end: np.ndarray,
           annotations: list[tuple[str, float, float]] = ()) -> np.ndarray:  # fmt: skip
    """Step index (int32) of every event (-1: outside all steps); see the module docstring.

    ``when``: CPU time of the runtime call that launched each event (NaN: unknown; None:
    none known)."""
    out = np.full(len(start), -1, dtype=np.int32)
    if not steps or not len(start):
        return out
    cpu_a = np.array([s.cpu_start for s in steps])
    cpu_b = np.array([s.cpu_end for s in steps])
    rest = None  # the events placed by GPU time: every one, or those of unknown launch
    if when is not None:
        unknown = np.isnan(when)
        _place(out, np.flatnonzero(~unknown), cpu_a, cpu_b, when)
        if unknown.all():
            del unknown
        else:
            rest = np.flatnonzero(unknown)
            del unknown
            if not len(rest):
                return out
    launched = extents(len(steps), out, start, end)
    _place(out, rest, *disjoint(launched).T, start)
    own = match_annotations(steps, list(annotations))
    own[~np.isnan(launched[:, 0])] = np.nan  # a step with launched work has its window
    _place(out, rest, *disjoint(own).T, start)
    bare = np.isnan(launched[:, 0]) & np.isnan(own[:, 0])  # neither: its CPU range
    _place(out, rest, np.where(bare, cpu_a, np.nan), cpu_b, start)
    return out


def disjoint(win: np.ndarray) -> np.ndarray:
    """Windows in step order made not to overlap: each starts no earlier than every earlier
    one ended (empty where it lies wholly inside an earlier one); NaN rows stay NaN."""
    out = win.copy()
    reach = -np.inf
    for i in range(len(out)):
        a, b = out[i]
        if np.isnan(a):
            continue
        a = max(a, reach)
        b = max(b, a)
        out[i] = (a, b)
        reach = b
    return out


def own_windows(steps: list[Step], step: np.ndarray, start: np.ndarray,
                end: np.ndarray) -> tuple[list[Step], np.ndarray, np.ndarray]:  # fmt: skip
    """The steps that own GPU work, their events renumbered, and their disjoint windows."""
    win = extents(len(steps), step, start, end)
    keep = ~np.isnan(win[:, 0])
    if keep.all():
        return steps, step, disjoint(win)
    new_index = np.cumsum(keep) - 1
    renumbered = np.where(step >= 0, new_index[np.maximum(step, 0)], -1)
    kept = [s for s, k in zip(steps, keep, strict=True) if k]
    return kept, renumbered, disjoint(win[keep]).reshape(-1, 2)
