"""Open connections to a store, with retry while another process holds its lock.

Embedded DuckDB allows one read-write process or many read-only processes per file, so
writers open only to commit and readers open short-lived read-only connections.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from store.errors import StoreBusy, StoreError, StoreMissing, is_lock_conflict
from store.location import StoreLocation, check_duckdb_file, redact
from store.retry import retry
from store.sql import NO_EXTENSION_LOADING
from store.turnstile import take_turn


def _open_once(loc: StoreLocation, read_only: bool) -> duckdb.DuckDBPyConnection:
    if loc.kind == "ducklake":
        from store.lake.catalog import open_lake

        return open_lake(loc, read_only=read_only)
    path = loc.file  # StoreError, never a file named "None" in the current folder
    if read_only and not path.exists():
        raise StoreMissing(f"no store at {path} yet: run a collector first")
    check_duckdb_file(path)  # its folder was made by open_with_retry, before the turnstile
    return duckdb.connect(str(path), read_only=read_only, config=NO_EXTENSION_LOADING)


def open_with_retry(
    loc: StoreLocation, *, read_only: bool, timeout_s: float
) -> duckdb.DuckDBPyConnection:
    """Open ``loc``; on a lock conflict wait until ``timeout_s``.

    An embedded file is opened through its turnstile (store/turnstile.py): once this
    process holds the turn it is next, so it polls the file lock briefly instead of
    backing off to a second and losing races to a writer that commits in a loop.
    """
    if loc.kind != "duckdb":
        return _retry_open(loc, read_only, timeout_s, timeout_s, max_delay_s=1.0)
    path = loc.file
    deadline = time.monotonic() + timeout_s
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    with take_turn(path, deadline) as held:
        left = max(deadline - time.monotonic(), 0.0)
        delay = 0.02 if held else 1.0
        return _retry_open(loc, read_only, left, timeout_s, max_delay_s=delay)


def _retry_open(
    loc: StoreLocation,
    read_only: bool,
    left_s: float,
    timeout_s: float,
    *,
    max_delay_s: float,
) -> duckdb.DuckDBPyConnection:
    """Retry the open for ``left_s``; the message names the caller's whole ``timeout_s``."""

    def attempt() -> duckdb.DuckDBPyConnection:
        try:
            return _open_once(loc, read_only)
        except duckdb.IOException as exc:
            if is_lock_conflict(exc):
                raise
            # An unreadable path or a file that is not a DuckDB store: no retry helps.
            raise StoreError(f"store {loc.describe()}: cannot open ({redact(str(exc))})") from None

    mode = "read-only" if read_only else "read-write"
    return retry(
        attempt,
        transient=lambda exc: isinstance(exc, duckdb.Error) and is_lock_conflict(exc),
        timeout_s=left_s,
        max_delay_s=max_delay_s,
        give_up=lambda _exc: StoreBusy(
            f"store {loc.describe()} is busy: another process holds it; "
            f"could not open {mode} within {timeout_s:g} s"
        ),
    )


@contextmanager
def connection(
    loc: StoreLocation, *, read_only: bool, timeout_s: float = 10.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection that is always closed, so the file lock is held as briefly as possible.

    Closing a read-write connection to an embedded store checkpoints it and releases the
    file; a transaction the block left open is rolled back."""
    con = open_with_retry(loc, read_only=read_only, timeout_s=timeout_s)
    try:
        yield con
    except duckdb.Error as exc:
        if loc.kind == "ducklake":  # its catalog or object storage gone: store unavailable
            from store.lake.catalog import outage

            if (plain := outage(loc, exc)) is not None:
                raise plain from exc
        raise
    finally:
        con.close()
