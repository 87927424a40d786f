"""Named queries over the series views (migration 0011): `collectors check` and the Trends
page read the same points, so both see the same history and the same change points."""

from __future__ import annotations

import pandas as pd

from store.location import StoreLocation
from store.reader import query_df

_HOST = "(?::VARCHAR IS NULL OR host = ?)"
# What every consumer of a series point needs (v_series_points has the key columns too).
_POINT_COLUMNS = (
    "series_id, family, host, series, point, metric, metric_label, unit, better, run_id, "
    "measured_at, value, engine, engine_version, torch, nccl, driver"
)


def series_list(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """One row per series (optionally on one host): label, metric, runs, first/newest."""
    return query_df(
        loc,
        f"SELECT * FROM v_series WHERE {_HOST} ORDER BY family, host, series",
        [host, host],
    )


def series_points(
    loc: StoreLocation, host: str | None = None, series_ids: list[str] | None = None
) -> pd.DataFrame:
    """Every point of the series on ``host`` (all hosts: None), or of the given series
    ids, oldest first within each series (ties by run id, as run ids sort by time)."""
    ids = "\x1f".join(series_ids) if series_ids is not None else None  # hashable cache key
    return query_df(
        loc,
        f"SELECT {_POINT_COLUMNS} FROM v_series_points WHERE {_HOST} "
        "AND (?::VARCHAR IS NULL OR list_contains(string_split(?, chr(31)), series_id)) "
        "ORDER BY series_id, measured_at, run_id",
        [host, host, ids, ids],
    )


def host_known(loc: StoreLocation, host: str) -> bool:
    """Whether any run in the store is about ``host``."""
    return not query_df(loc, "SELECT 1 FROM v_runs WHERE host = ? LIMIT 1", [host]).empty
