"""Best layout per concurrency range, crossovers, what the policy costs, and close calls.

At a fixed concurrency c every layout emits c tokens per step, so the lowest TPOT is also
the highest throughput: one ranking serves both. Only layouts that fit (weights in memory,
every request admitted) count; the ``allowed`` mask is the caller's (compliant with the
policy and not resting on an unmeasured collective). Two layouts whose measured-error
bands overlap at a concurrency are too close to call there.
"""

from __future__ import annotations

import numpy as np

from planner.tradeoff.types import Call, Crossover, LayoutCurve, PlanResult, PolicyCost, Range

STABLE_POINTS = 8  # a swap must hold this many grid points (>= one DP staircase period)


def _tpot_matrix(curves: list[LayoutCurve], allowed: list[bool]) -> np.ndarray:
    m = np.vstack([c.tpot_ms for c in curves])
    mask = np.vstack([c.fits & ok for c, ok in zip(curves, allowed, strict=True)])
    return np.where(mask & np.isfinite(m), m, np.inf)


def best_index(curves: list[LayoutCurve], allowed: list[bool]) -> np.ndarray:
    """Index of the best allowed, fitting layout per concurrency (-1: none fits)."""
    if not curves:
        return np.zeros(0, dtype=int)
    m = _tpot_matrix(curves, allowed)
    idx = np.argmin(m, axis=0)
    return np.where(np.isfinite(m.min(axis=0)), idx, -1)


def overlapping(curves: list[LayoutCurve], allowed: list[bool], best: int, j: int) -> list[int]:
    """Allowed, fitting layouts whose band overlaps the best one's at grid point j."""
    b = curves[best]
    out = []
    for k, (c, ok) in enumerate(zip(curves, allowed, strict=True)):
        if k == best or not ok or not c.fits[j] or not np.isfinite(c.tpot_ms[j]):
            continue
        if c.low_ms[j] <= b.high_ms[j] and b.low_ms[j] <= c.high_ms[j]:
            out.append(k)
    return sorted(out, key=lambda k: curves[k].tpot_ms[j])


def call_at(res: PlanResult, c: int, calibrated: bool = False) -> Call:
    """The recommendation at concurrency c and the layouts too close to call with it."""
    curves = [r.view(calibrated) for r in res.layouts]
    ok = [r.recommendable for r in res.layouts]
    j = curves[0].at(c)
    i = int(best_index(curves, ok)[j])
    if i < 0:
        return Call(int(c), None, float("nan"), float("nan"), float("nan"))
    best = curves[i]
    close = tuple(curves[k].layout.name for k in overlapping(curves, ok, i, j))
    return Call(int(c), best.layout.name, float(best.tpot_ms[j]), float(best.low_ms[j]),
                float(best.high_ms[j]), close)  # fmt: skip


def ranges(curves: list[LayoutCurve], allowed: list[bool]) -> list[Range]:
    if not curves:
        return []
    conc = curves[0].concurrency
    idx = best_index(curves, allowed)
    # Runs shorter than STABLE_POINTS (staircase flicker) join the run before them.
    runs: list[list[int]] = []
    for j, i in enumerate(idx):
        if runs and runs[-1][0] == i:
            runs[-1][2] = j
        else:
            runs.append([int(i), j, j])
    merged: list[list[int]] = []
    for run in runs:
        short = run[2] - run[1] + 1 < STABLE_POINTS and run[2] < len(idx) - 1
        if merged and (short or merged[-1][0] == run[0]):
            merged[-1][2] = run[2]
        else:
            merged.append(run)
    out: list[Range] = []
    for i, a, b in merged:
        if i >= 0:
            cur = curves[i]
            out.append(Range(int(conc[a]), int(conc[b]), cur.layout.name,
                             float(cur.tpot_ms[a]), float(cur.tpot_ms[b])))  # fmt: skip
    return out


def crossovers(curves: list[LayoutCurve], allowed: list[bool]) -> list[Crossover]:
    """Where two allowed layouts swap places (both fitting), in concurrency order."""
    out: list[Crossover] = []
    live = [c for c, ok in zip(curves, allowed, strict=True) if ok]
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            both = a.fits & b.fits
            diff = np.where(both, a.tpot_ms - b.tpot_ms, np.nan)
            sign = np.sign(diff)
            prev, cur = sign[:-1], sign[1:]
            flips = np.nonzero((prev != cur) & (cur != 0) & ~np.isnan(prev) & ~np.isnan(cur))[0]
            for j in flips + 1:
                # Only a lasting swap counts: ceil(c / dp) staircases make short flickers.
                hold = sign[j : j + STABLE_POINTS]
                if not np.all(hold == sign[j]):
                    continue
                faster, slower = (a, b) if sign[j] < 0 else (b, a)
                out.append(Crossover(int(a.concurrency[j]), faster.layout.name, slower.layout.name))
    return sorted(out, key=lambda x: (x.concurrency, x.faster))


def policy_costs(curves: list[LayoutCurve], compliant: list[bool],
                 measured: list[bool]) -> list[PolicyCost]:  # fmt: skip
    """Per concurrency: the best blocked layout's gain over the best compliant one (> 0),
    both resting on measured (or fitted) collectives."""
    if not curves or all(compliant):
        return []
    good = best_index(curves, [c and m for c, m in zip(compliant, measured, strict=True)])
    bad = best_index(curves, [not c and m for c, m in zip(compliant, measured, strict=True)])
    out = []
    for j, c in enumerate(curves[0].concurrency):
        if good[j] < 0 or bad[j] < 0:
            continue
        gain = float(curves[good[j]].tpot_ms[j] - curves[bad[j]].tpot_ms[j])
        if gain > 0:
            out.append(PolicyCost(int(c), curves[bad[j]].layout.name,
                                  curves[good[j]].layout.name, gain))  # fmt: skip
    return out


def unmeasured_flips(res: PlanResult, measured: set[str]) -> list[str]:
    """Concurrency ranges where the calibrated view recommends a layout the host did not
    measure while the fitted model recommends a measured one: the calibration moved only the
    measured layout (its level did not carry), so the new pick rests on the fitted model."""
    out = []
    for new in res.recommended_calibrated:
        if new.layout in measured:
            continue
        for old in res.recommended:
            lo, hi = max(new.start, old.start), min(new.end, old.end)
            if old.layout not in measured or lo > hi:
                continue
            was = res.layout(old.layout)
            j = was.curve.at(lo)
            slower = was.view(True).tpot_ms[j] / was.curve.tpot_ms[j] - 1
            span = f"{lo}" if lo == hi else f"{lo}-{hi}"
            out.append(f"Calibrated view, concurrency {span}: {new.layout} (not measured: the "
                       f"fitted model) replaces your measured {old.layout}, which ran "
                       f"{slower:+.0%} against the fitted model; that level did not carry to "
                       f"other layouts, so measure {new.layout} before switching.")  # fmt: skip
    return out
