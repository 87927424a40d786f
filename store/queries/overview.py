"""Named queries the Overview and shared sidebar use. Every value is a bound parameter.

Each page area has its own module of named queries (store/queries_*.py); this one holds
the runs-level ones every page shares.
"""

from __future__ import annotations

import pandas as pd

from store import UNKNOWN_HOST
from store.location import StoreLocation
from store.reader import query_df


def hosts(loc: StoreLocation) -> pd.DataFrame:
    """One row per host: GPU model/count, OS, CPU, last seen, run count."""
    return query_df(loc, "SELECT * FROM v_hosts ORDER BY last_seen_at DESC")


def host_names(loc: StoreLocation) -> list[str]:
    return hosts(loc)["host"].tolist()


def recent_runs(
    loc: StoreLocation, host: str | None = None, verb: str | None = None, limit: int = 50
) -> pd.DataFrame:
    """Newest runs first, optionally for one host and/or one collector verb."""
    return query_df(
        loc,
        "SELECT run_id, verb, label, host, status, message, started_at, finished_at, "
        "duration_s, gpu_model, gpu_count FROM v_runs "
        "WHERE (?::VARCHAR IS NULL OR host = ?) AND (?::VARCHAR IS NULL OR verb = ?) "
        "ORDER BY finished_at DESC, run_id DESC LIMIT ?",
        [host, host, verb, verb, int(limit)],
    )


def unknown_host_runs(loc: StoreLocation) -> pd.DataFrame:
    """Imported runs whose files named no host (store.UNKNOWN_HOST), newest first, with the
    GPUs the files name and the machine that imported them."""
    return query_df(
        loc,
        "SELECT run_id, verb, gpu_model, gpu_count, imported_on, label, finished_at "
        "FROM v_runs WHERE host = ? ORDER BY finished_at DESC, run_id DESC",
        [UNKNOWN_HOST],
    )


def freshness(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """Last successful and last attempted run per host x collector verb."""
    return query_df(
        loc,
        "SELECT * FROM v_freshness WHERE (?::VARCHAR IS NULL OR host = ?) ORDER BY host, verb",
        [host, host],
    )


def run_info(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """The runs row for one run id (empty when unknown)."""
    return query_df(loc, "SELECT * FROM v_runs WHERE run_id = ?", [run_id])
