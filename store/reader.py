"""Read side for pages: short-lived read-only connections, results cached on data version.

No connection to a file store is kept: each query opens, reads and closes, so a collector
can take the file read-write between two queries. A lake holds no lock: each thread reads
through a cursor it keeps on the process's lake instance (store.lake.catalog.read_cursor). Results are cached keyed by the store's data version,
so a new commit is visible on the next query and an unchanged store costs one ``stat``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import pandas as pd

from store import migrate
from store.connect import connection
from store.location import StoreLocation

READ_TIMEOUT_S = 15.0
_CACHE_MAX = 512
_cache: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
_lock = threading.Lock()
_checked_versions: set[tuple[str, str]] = set()


def data_version(loc: StoreLocation) -> str:
    """A token that changes whenever the store's data may have changed."""
    if loc.kind == "ducklake":
        from store.lake.catalog import lake_data_version

        return lake_data_version(loc)
    assert loc.path is not None
    parts = []
    for path in (loc.path, loc.path.with_name(loc.path.name + ".wal")):
        try:
            st = path.stat()
            parts.append(f"{st.st_mtime_ns}:{st.st_size}")
        except FileNotFoundError:
            parts.append("-")
    return "|".join(parts)


def pinned(loc: StoreLocation) -> StoreLocation:
    """``loc`` with its data version asked now, for every query of one page run: a lake's
    version is a catalog round trip (~25 per page at 10,000 runs: most of a warm render),
    a file's is a ``stat`` and stays unpinned. A store that cannot say is left unpinned, so
    the first query raises the error where the page handles it."""
    from dataclasses import replace

    from store.errors import StoreError

    if loc.kind != "ducklake":
        return loc
    try:
        return replace(loc, pinned_version=data_version(loc))
    except StoreError:
        return loc


def store_exists(loc: StoreLocation) -> bool:
    if loc.kind == "ducklake":
        return True
    assert loc.path is not None
    return loc.path.exists()


def query_df(loc: StoreLocation, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
    """Run a parameterised read query; cached until the store's data version changes (the
    version ``pinned`` took for this page run, when it took one)."""
    version = loc.pinned_version or data_version(loc)
    key = (loc.url, version, sql, tuple(params or ()))
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key].copy()
    with _reading(loc) as con:
        if (loc.url, version) not in _checked_versions:
            migrate.check_readable(con)
            _checked_versions.add((loc.url, version))
        frame = con.execute(sql, params or []).df()
    with _lock:
        _cache[key] = frame
        while len(_cache) > _CACHE_MAX:
            _cache.popitem(last=False)
    return frame.copy()


@contextmanager
def _reading(loc: StoreLocation) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to read from: a file store's short-lived one (its file lock held for one
    query only); a lake's cursor this thread keeps (no lock; store.lake.catalog.read_cursor),
    dropped after an error, whose outage reads as one line as on every lake connection."""
    if loc.kind != "ducklake":
        with connection(loc, read_only=True, timeout_s=READ_TIMEOUT_S) as con:
            yield con
        return
    from store.lake import catalog

    try:
        yield catalog.read_cursor(loc)
    except BaseException as exc:
        catalog.drop_read_cursor(loc)
        if isinstance(exc, duckdb.Error) and (plain := catalog.outage(loc, exc)) is not None:
            raise plain from exc
        raise


def clear_cache() -> None:
    with _lock:
        _cache.clear()
        _checked_versions.clear()
