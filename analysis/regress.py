"""Change detection for measured series: where a series' level moved, by how much, and
whether the move is a regression or an improvement.

A series is one figure measured run after run at one fixed point (store/migrations/
0011_series.sql). Four steps, each for a reason:

1. Outliers: a run far off the median of its neighbours is set aside (a Hampel filter), so
   a single wild run neither is a change nor helps two noisy runs pass for a level.
2. Candidates: ruptures' kernel change-point detection (``KernelCPD``, RBF kernel, exact
   penalised segmentation in C) on values scaled to the series' own noise (a robust
   spread of run-to-run differences), so one penalty fits a 1% and a 10% noisy series.
   The RBF kernel bounds what one point can contribute; ``min_size`` keeps a level from
   counting until ``min_runs`` runs show it.
3. Settle: each change point is moved to where it best splits its two levels (absolute
   deviation from their medians), and dropped when a level it bounds is still too short.
4. Merge: levels whose medians differ by less than ``min_change`` are merged, weakest
   first (as Otava's merge step does); what is left is every move worth reporting.

docs/benchmarks.md records why ruptures over Apache Otava and signal-processing-algorithms
(each run through steps 1, 3 and 4 alike) and how the constants below were chosen.

Only numpy here; ruptures (which brings scipy) is imported on first use, so a page that
imports this module pays for it only when it draws change points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_RUNS = 3  # runs at a level before it counts: one or two wild runs are not a change
MIN_CHANGE = 0.05  # relative move between two levels worth reporting (--min-change)
# Tuned on generated histories (benchmarks/check_detectors.py, docs/benchmarks.md): the
# kernel's width in noise units, and the penalty per change point as a multiple of ln(n).
RBF_GAMMA = 0.1
PENALTY_PER_LN_N = 0.5
_NOISE_FLOOR = 1e-3  # relative: a series steadier than 0.1% is treated as 0.1% noisy
OUTLIER_SIGMAS = 4.0  # a run this many noise units off its neighbours' median is set aside

LOWER, HIGHER = "lower", "higher"  # which way a metric is better


@dataclass(frozen=True)
class Shift:
    """A move from one level to the next; ``index`` is the first point of the new level."""

    index: int
    before: float  # median of the level before
    after: float  # median of the level from ``index`` on

    @property
    def change(self) -> float:
        """Relative move, signed: +0.12 is 12% higher."""
        return (self.after - self.before) / abs(self.before)

    def kind(self, better: str) -> str:
        """``regression`` or ``improvement`` for a metric where ``better`` is lower/higher."""
        worse = self.after > self.before if better == LOWER else self.after < self.before
        return "regression" if worse else "improvement"


def noise_scale(values: np.ndarray) -> float:
    """Robust relative spread of one run: MAD of successive differences / sqrt(2).

    Differences cancel a level, so a step adds one large difference and barely moves the
    median; an outlier adds two. Scaled by 1.4826 to read as a standard deviation."""
    if len(values) < 3:
        return _NOISE_FLOOR
    rel = values / np.median(values)
    diffs = np.diff(rel)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2), _NOISE_FLOOR)


def candidates(values: Sequence[float], min_runs: int = MIN_RUNS) -> list[int]:
    """ruptures' change points: indices where a new level starts (none for a series too
    short to show one)."""
    x = np.asarray(values, dtype=float)
    # Every figure a series holds is positive (a time, a rate); anything else has no level.
    if len(x) < 2 * min_runs or not np.isfinite(x).all() or not (x > 0).all():
        return []
    import ruptures

    z = (x / np.median(x) - 1.0) / noise_scale(x)
    algo = ruptures.KernelCPD(kernel="rbf", min_size=min_runs, params={"gamma": RBF_GAMMA})
    ends = algo.fit(z.reshape(-1, 1)).predict(pen=PENALTY_PER_LN_N * math.log(len(x)))
    return [int(e) for e in ends[:-1]]  # the last "end" is len(x)


def settle(values: Sequence[float], points: Sequence[int], min_runs: int = MIN_RUNS) -> list[int]:
    """Each change point moved (within ``min_runs`` runs) to where it splits its two levels
    best by absolute deviation from their medians, then dropped when a level it bounds has
    fewer than ``min_runs`` runs.

    Why: a detector that needs ``min_runs`` points per level places a step that is only two
    runs old one run early (the level takes an old run to make up its size); settled, it
    stays unreported until the third run, and then at its first run."""
    x = np.asarray(values, dtype=float)
    cuts = sorted(set(points))
    for i, c in enumerate(cuts):
        lo = cuts[i - 1] + 1 if i else 1
        hi = cuts[i + 1] - 1 if i + 1 < len(cuts) else len(x) - 1
        span = range(max(lo, c - min_runs + 1), min(hi, c + min_runs - 1) + 1)
        start, end = cuts[i - 1] if i else 0, cuts[i + 1] if i + 1 < len(cuts) else len(x)
        cuts[i] = min(span, key=lambda k: (_l1(x[start:k]) + _l1(x[k:end]), abs(k - c)), default=c)
    while True:
        bounds = [0, *cuts, len(x)]
        short = [i for i in range(len(cuts))
                 if min(bounds[i + 1] - bounds[i], bounds[i + 2] - bounds[i + 1]) < min_runs]  # fmt: skip
        if not short:
            return cuts
        del cuts[short[-1]]  # the newest first: a young level is the one still forming


def _l1(part: np.ndarray) -> float:
    return float(np.abs(part - np.median(part)).sum()) if len(part) else 0.0


Detector = Callable[[np.ndarray, int], list[int]]  # (values, min_runs) -> change points


def change_points(
    values: Sequence[float], min_runs: int = MIN_RUNS, detect: Detector = candidates
) -> list[int]:
    """Indices where a lasting new level starts."""
    x = np.asarray(values, dtype=float)
    return settle(x, detect(x, min_runs), min_runs)


def merge_small(values: Sequence[float], points: Sequence[int], min_change: float) -> list[Shift]:
    """The shifts between the levels ``points`` cut, merging any two adjacent levels whose
    medians differ by less than ``min_change`` (the weakest first, then recomputed)."""
    x = np.asarray(values, dtype=float)
    cuts = sorted(points)
    while cuts:  # no cut, no shift (and no median of a series every run of which is set aside)
        bounds = [0, *cuts, len(x)]
        medians = [float(np.median(x[a:b])) for a, b in zip(bounds, bounds[1:], strict=False)]
        shifts = [Shift(c, medians[i], medians[i + 1]) for i, c in enumerate(cuts)]
        weakest = min(range(len(shifts)), key=lambda i: abs(shifts[i].change))
        if abs(shifts[weakest].change) >= min_change:
            return shifts
        del cuts[weakest]
    return []


def outliers(values: Sequence[float], min_runs: int = MIN_RUNS) -> np.ndarray:
    """Runs far off the median of the runs around them (``min_runs - 1`` each side): a
    Hampel filter. Fewer than ``min_runs`` such runs in a row are always caught, since the
    median follows the majority; a lasting step is not, for the same reason.

    Why set them aside rather than lean on the detector alone: an outlier next to two
    noisy runs makes a three-run "level" a detector accepts (seen at the start of a
    history); without it, those two runs are too few to count."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 * min_runs or not (x > 0).all():
        return np.zeros(len(x), dtype=bool)
    half = min_runs - 1
    around = np.empty_like(x)  # the window is cut short at both ends of the history
    around[half:len(x) - half] = np.median(np.lib.stride_tricks.sliding_window_view(
        x, 2 * half + 1), axis=1)  # fmt: skip
    for i in (*range(half), *range(len(x) - half, len(x))):
        around[i] = np.median(x[max(0, i - half) : i + half + 1])
    return np.abs(x / around - 1.0) > OUTLIER_SIGMAS * noise_scale(x)


def shifts(
    values: Sequence[float],
    min_change: float = MIN_CHANGE,
    min_runs: int = MIN_RUNS,
    detect: Detector = candidates,
) -> list[Shift]:
    """Every lasting move of at least ``min_change`` in a series, oldest first; outliers
    (``outliers``) take no part, and ``index`` counts every run, outliers included.
    ``detect`` proposes the change points (benchmarks/check_detectors.py swaps it)."""
    x = np.asarray(values, dtype=float)
    kept = np.flatnonzero(~outliers(x, min_runs))
    found = merge_small(x[kept], change_points(x[kept], min_runs, detect), min_change)
    return [Shift(int(kept[s.index]), s.before, s.after) for s in found]


def current_shift(
    values: Sequence[float], min_change: float = MIN_CHANGE, min_runs: int = MIN_RUNS
) -> Shift | None:
    """The move into the level the newest run is on, or None when it is the first level."""
    found = shifts(values, min_change, min_runs)
    return found[-1] if found else None
