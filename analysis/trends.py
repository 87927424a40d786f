"""From series points (store.queries.series.series_points) to what `check` reports and the
Trends page draws: each series' levels and shifts, the version changes along it, and one
finding per series whose newest level moved from the one before.

Pure: a pandas frame in, dataclasses out; the detection itself is analysis/regress.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from analysis import regress

# Versions a point carries (v_series_points), with the name a line gives each.
VERSION_FIELDS = (("engine_version", None), ("torch", "torch"), ("nccl", "NCCL"),
                  ("driver", "driver"))  # fmt: skip
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


@dataclass(frozen=True)
class VersionChange:
    """Versions that differ between point ``index - 1`` and point ``index`` (both known)."""

    index: int
    run_id: str
    measured_at: datetime
    changes: tuple[tuple[str, str, str], ...]  # (what, before, after)

    def describe(self) -> str:
        return ", ".join(f"{what} {old} -> {new}" for what, old, new in self.changes)


@dataclass
class SeriesTrend:
    """One series analysed: its points (oldest first), shifts, version changes, and the
    runs set aside as outliers (a mask over the points)."""

    series_id: str
    points: pd.DataFrame
    shifts: list[regress.Shift]
    version_changes: list[VersionChange]
    outliers: np.ndarray

    @property
    def first(self) -> pd.Series:
        return self.points.iloc[0]

    def levels(self) -> np.ndarray:
        """The median of each point's level: a step line to draw under the runs."""
        values = self.points["value"].to_numpy(dtype=float)
        out = np.empty_like(values)
        bounds = [0, *(s.index for s in self.shifts), len(values)]
        for a, b in zip(bounds, bounds[1:], strict=False):
            out[a:b] = np.median(values[a:b])
        return out

    def version_change_near(self, index: int) -> VersionChange | None:
        """The version change at ``index``, else within one run of it (detection can place
        a step one run early or late when the first run after an upgrade is noisy)."""
        near = [v for v in self.version_changes if abs(v.index - index) <= 1]
        return min(near, key=lambda v: abs(v.index - index)) if near else None


@dataclass(frozen=True)
class Finding:
    """The newest level of a series against the level before it."""

    series_id: str
    series: str
    host: str
    metric_label: str
    unit: str
    better: str
    kind: str  # regression | improvement
    before: float
    after: float
    change: float  # relative, signed
    since_run_id: str
    since_at: datetime
    runs_since: int  # runs at the new level, the newest included
    newest_run_id: str
    versions: VersionChange | None = field(default=None)
    family: str = ""

    def line(self) -> str:
        changed = f"changed then: {self.versions.describe()}" if self.versions else (
            "no version change recorded then")  # fmt: skip
        return (f"{self.kind.upper()} {self.host} {self.series}: {number(self.before)} -> "
                f"{number(self.after)} {self.unit} ({self.change * 100:+.1f}%) since run "
                f"{self.since_run_id} ({self.since_at:%Y-%m-%d %H:%M} UTC, {self.runs_since} "
                f"runs); {changed}")  # fmt: skip

    def as_row(self) -> dict[str, Any]:
        """The finding as ``check`` stores it (migration 0016, check_findings)."""
        return {
            "kind": self.kind, "series_id": self.series_id, "family": self.family,
            "host": self.host, "series": self.series, "metric_label": self.metric_label,
            "unit": self.unit, "better": self.better, "before": self.before,
            "after": self.after, "change": self.change, "since_run_id": self.since_run_id,
            "since_at": self.since_at, "runs_since": self.runs_since,
            "newest_run_id": self.newest_run_id,
            "versions_changed": self.versions.describe() if self.versions else None,
        }  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "series_id": self.series_id, "series": self.series,
            "host": self.host, "metric": self.metric_label, "unit": self.unit,
            "better": self.better, "before": self.before, "after": self.after,
            "change_pct": round(self.change * 100, 2), "since_run_id": self.since_run_id,
            "since": self.since_at.isoformat(), "runs_since": self.runs_since,
            "newest_run_id": self.newest_run_id,
            "versions_changed": [
                {"what": what, "before": old, "after": new}
                for what, old, new in (self.versions.changes if self.versions else ())
            ],
        }  # fmt: skip


def number(value: float) -> str:
    """A figure with about four significant digits and no exponent: 41.27, 1,843."""
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if size >= 100 else f"{value:.2f}" if size >= 10 else f"{value:.3g}"


def _known(values: pd.Series) -> np.ndarray:
    """A version column as Python strings, None for unknown (NULL, NaN)."""
    arr = values.to_numpy(dtype=object, na_value=None)
    return np.array([None if v is None or v != v else str(v) for v in arr], dtype=object)


def _moves(points: pd.DataFrame, first: np.ndarray) -> dict[str, np.ndarray]:
    """Per version field, where a known version differs from the previous point's known one
    (``first``: the points that start a series, which have no previous point)."""
    out = {}
    for c, _ in VERSION_FIELDS:
        v = _known(points[c])
        prev = np.r_[None, v[:-1]]
        known = np.not_equal(v, None) & np.not_equal(prev, None) & ~first
        out[c] = known & (v != prev)
    return out


def _changes(points: pd.DataFrame, moved: dict[str, np.ndarray], start: int,
             end: int) -> list[VersionChange]:  # fmt: skip
    """The version changes of the points ``start:end`` (one series), indexed from its start."""
    hits = np.flatnonzero(np.logical_or.reduce([m[start:end] for m in moved.values()]))
    out = []
    for i in hits:
        row, before = points.iloc[start + i], points.iloc[start + i - 1]
        engine = row["engine"]
        changes = tuple(
            (name or ENGINE_NAMES.get(str(engine), str(engine)), str(before[c]), str(row[c]))
            for c, name in VERSION_FIELDS if moved[c][start + i]
        )  # fmt: skip
        out.append(VersionChange(int(i), row["run_id"], row["measured_at"], changes))
    return out


def version_changes(points: pd.DataFrame) -> list[VersionChange]:
    """Where a known version differs from the previous point's (unknown -> known is not a
    change: the snapshot that records it may simply have started then)."""
    first = np.zeros(len(points), dtype=bool)
    first[:1] = True
    return _changes(points, _moves(points, first), 0, len(points))


def _utc(value: Any) -> datetime:
    stamp = pd.Timestamp(value)
    return (stamp.tz_convert("UTC") if stamp.tzinfo else stamp.tz_localize("UTC")).to_pydatetime()


def analyse(
    points: pd.DataFrame, min_change: float = regress.MIN_CHANGE, min_runs: int = regress.MIN_RUNS
) -> list[SeriesTrend]:
    """Every series in ``points`` (ordered by series, then time) with its shifts.

    One pass over numpy arrays, a slice per series: a fleet has ~50,000 series, and a
    pandas group and string conversion per series cost ~100 ms each (issue 58)."""
    if points.empty:
        return []
    points = points.iloc[np.argsort(points["series_id"].to_numpy(), kind="stable")]
    points = points.reset_index(drop=True)  # each series' points together, in time order
    ids = points["series_id"].to_numpy()
    first = np.r_[True, ids[1:] != ids[:-1]]
    moved = _moves(points, first)
    values = points["value"].to_numpy(dtype=float)
    bounds = [*np.flatnonzero(first), len(points)]
    out = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        x = values[start:end]
        out.append(SeriesTrend(str(ids[start]), points.iloc[start:end].reset_index(drop=True),
                               regress.shifts(x, min_change, min_runs),
                               _changes(points, moved, start, end),
                               regress.outliers(x, min_runs)))  # fmt: skip
    return out


def stored_trend(points: pd.DataFrame, shifts: list[list[float]],
                 min_runs: int = regress.MIN_RUNS) -> SeriesTrend:  # fmt: skip
    """One series as a ``check`` run kept it (migration 0016): its points (oldest first) and
    the level changes it found ([first index, before, after], ...). Outliers and version
    changes are recomputed from the points (numpy and pandas only: no change detection)."""
    group = points.reset_index(drop=True)
    values = group["value"].to_numpy(dtype=float)
    return SeriesTrend(str(group["series_id"].iloc[0]), group,
                       [regress.Shift(int(i), float(b), float(a)) for i, b, a in shifts],
                       version_changes(group), regress.outliers(values, min_runs))  # fmt: skip


def finding(trend: SeriesTrend) -> Finding | None:
    """The move into the newest level, when the series has more than one level."""
    if not trend.shifts:
        return None
    shift = trend.shifts[-1]
    first, at, newest = trend.first, trend.points.iloc[shift.index], trend.points.iloc[-1]
    return Finding(
        series_id=trend.series_id, series=str(first["series"]), host=str(first["host"]),
        metric_label=str(first["metric_label"]), unit=str(first["unit"]),
        better=str(first["better"]), kind=shift.kind(str(first["better"])),
        before=shift.before, after=shift.after, change=shift.change,
        since_run_id=str(at["run_id"]), since_at=_utc(at["measured_at"]),
        runs_since=len(trend.points) - shift.index, newest_run_id=str(newest["run_id"]),
        versions=trend.version_change_near(shift.index), family=str(first["family"]),
    )  # fmt: skip


def findings(trends: list[SeriesTrend], since: datetime | None = None) -> list[Finding]:
    """Findings of every trend, regressions first then by size of the move; ``since``: only
    moves whose first run at the new level is at or after it."""
    found = [f for t in trends if (f := finding(t)) is not None]
    if since is not None:
        found = [f for f in found if f.since_at >= since]
    return sorted(found, key=lambda f: (f.kind != "regression", -abs(f.change), f.series_id))
