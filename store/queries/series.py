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


def latest_check(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """The newest ``check`` run (migration 0016) that covered ``host`` (None: one that
    covered every host): run_id, finished_at, series and points checked. Empty: none yet."""
    return query_df(
        loc,
        "SELECT run_id, host AS checked_on, finished_at, "
        "CAST(json_extract(args, '$.series') AS BIGINT) AS series, "
        "CAST(json_extract(args, '$.points') AS BIGINT) AS points, "
        "json_extract_string(args, '$.host') AS for_host FROM v_runs "
        "WHERE verb = 'check' AND status <> 'failed' "
        "AND (json_extract_string(args, '$.host') IS NULL "
        "OR json_extract_string(args, '$.host') = ?) "
        "ORDER BY finished_at DESC, run_id DESC LIMIT 1",
        [host],
    )


def check_findings(loc: StoreLocation, run_id: str, host: str | None = None,
                   kind: str | None = None) -> pd.DataFrame:  # fmt: skip
    """A check run's findings (on ``host``; of ``kind``), newest move first."""
    return query_df(
        loc,
        f"SELECT * EXCLUDE (run_id) FROM check_findings WHERE run_id = ? AND {_HOST} "
        "AND (?::VARCHAR IS NULL OR kind = ?) "
        "ORDER BY since_at DESC, abs(change) DESC, series_id",
        [run_id, host, host, kind, kind],
    )


def check_points(loc: StoreLocation, run_id: str, series_ids: list[str]) -> pd.DataFrame:
    """The points a check run kept of the given series, as series_points returns them."""
    ids = "\x1f".join(series_ids)
    return query_df(
        loc,
        f"SELECT {_POINT_COLUMNS.replace('run_id', 'point_run_id AS run_id')} "
        "FROM check_points WHERE run_id = ? "
        "AND list_contains(string_split(?, chr(31)), series_id) "
        "ORDER BY series_id, measured_at, point_run_id",
        [run_id, ids],
    )


# The collectors whose runs become series points (0011_series.sql's three families).
SERIES_VERBS = ("vllm-bench", "sglang-bench", "comm", "nccl-tests", "trace", "profile",
                "vllm-profile", "sglang-profile")  # fmt: skip


def series_runs(loc: StoreLocation, host: str | None = None) -> int:
    """How many runs feed the series (on ``host``): zero means there is nothing to trend.
    Answered from the runs table, not the series views (seconds at a fleet's 10,000 runs)."""
    frame = query_df(
        loc,
        f"SELECT count(*) AS n FROM v_runs WHERE {_HOST} AND status <> 'failed' "
        "AND list_contains(string_split(?, ','), verb)",
        [host, host, ",".join(SERIES_VERBS)],
    )
    return int(frame["n"].iloc[0])
