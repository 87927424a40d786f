"""Open connections to a store, with retry while another process holds its lock.

Embedded DuckDB allows one read-write process or many read-only processes per file, so
writers open only to commit and readers open short-lived read-only connections.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from store.errors import StoreBusy, StoreError, StoreMissing, is_lock_conflict
from store.location import StoreLocation, check_duckdb_file
from store.retry import retry
from store.sql import string_literal
from store.turnstile import take_turn

# Extensions come from pinned wheels only; never download or load one at run time.
_NO_EXTENSION_LOADING = {
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
}
# The name an embedded store is attached under in the process's own database (``writer``).
STORE_ALIAS = "stepscope_store"
_attach_lock = threading.Lock()  # ATTACH is database-wide: one attached store at a time


def _open_once(
    loc: StoreLocation, read_only: bool, attach: bool = False
) -> duckdb.DuckDBPyConnection:
    if loc.kind == "ducklake":
        from store.lake import open_lake

        return open_lake(loc, read_only=read_only)
    assert loc.path is not None
    if read_only and not loc.path.exists():
        raise StoreMissing(f"no store at {loc.path} yet: run a collector first")
    check_duckdb_file(loc.path)
    if not read_only:
        loc.path.parent.mkdir(parents=True, exist_ok=True)
    if attach:
        return _attach(loc)
    return duckdb.connect(str(loc.path), read_only=read_only, config=_NO_EXTENSION_LOADING)


def _attach(loc: StoreLocation) -> duckdb.DuckDBPyConnection:
    """A new connection to the process's default in-memory database, with the store
    attached read-write and made its default (``USE``), so unqualified names are its own.

    Why not ``duckdb.connect(path)``: each new database instance costs ~17 ms before it
    opens any file, and importing duckdb has already built the default one
    (duckdb/_dbapi_type_object.py parses ``DuckDBPyType("BIGNUM")`` at import, which needs
    it): ``default_connection()`` then takes 0.02 ms and ATTACH 13 ms, against 30 ms for a
    new connection to the same store (issue 12). Lock conflicts and unreadable files raise
    the same errors as connect. The compression setting is explained in ``writer``.
    """
    con = duckdb.default_connection().cursor()
    try:
        for name, value in _NO_EXTENSION_LOADING.items():
            con.execute(f"SET {name} = {value}")
        con.execute("SET disabled_compression_methods = 'fsst'")
        con.execute(f"ATTACH {string_literal(str(loc.path))} AS {STORE_ALIAS}")
        con.execute(f"USE {STORE_ALIAS}")
    except BaseException:
        con.close()
        raise
    return con


def _detach(con: duckdb.DuckDBPyConnection) -> None:
    """Close the commit's connection, then checkpoint and release the store (DETACH writes
    the WAL into the file, as closing a database does). Closing first rolls back whatever
    transaction the connection may have left open, which DETACH would refuse."""
    con.close()
    other = duckdb.default_connection().cursor()
    try:
        other.execute(f"DETACH {STORE_ALIAS}")
    finally:
        other.close()


def open_with_retry(
    loc: StoreLocation, *, read_only: bool, timeout_s: float, attach: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open ``loc``; on a lock conflict wait until ``timeout_s``.

    An embedded file is opened through its turnstile (store/turnstile.py): once this
    process holds the turn it is next, so it polls the file lock briefly instead of
    backing off to a second and losing races to a writer that commits in a loop.
    ``attach``: an embedded store is attached to the process's database (``_attach``).
    """
    if loc.kind != "duckdb" or loc.path is None:
        return _retry_open(loc, read_only, timeout_s, timeout_s, max_delay_s=1.0)
    deadline = time.monotonic() + timeout_s
    if not read_only:
        loc.path.parent.mkdir(parents=True, exist_ok=True)
    with take_turn(loc.path, deadline) as held:
        left = max(deadline - time.monotonic(), 0.0)
        delay = 0.02 if held else 1.0
        return _retry_open(loc, read_only, left, timeout_s, max_delay_s=delay, attach=attach)


def _retry_open(
    loc: StoreLocation,
    read_only: bool,
    left_s: float,
    timeout_s: float,
    *,
    max_delay_s: float,
    attach: bool = False,
) -> duckdb.DuckDBPyConnection:
    """Retry the open for ``left_s``; the message names the caller's whole ``timeout_s``."""

    def attempt() -> duckdb.DuckDBPyConnection:
        try:
            return _open_once(loc, read_only, attach)
        except duckdb.IOException as exc:
            if is_lock_conflict(exc):
                raise
            # An unreadable path or a file that is not a DuckDB store: no retry helps.
            raise StoreError(f"store {loc.describe()}: cannot open ({exc})") from None

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
    """A connection that is always closed, so the file lock is held as briefly as possible."""
    con = open_with_retry(loc, read_only=read_only, timeout_s=timeout_s)
    try:
        yield con
    except duckdb.Error as exc:
        if loc.kind == "ducklake":  # its catalog or object storage gone: store unavailable
            from store.lake import outage

            if (plain := outage(loc, exc)) is not None:
                raise plain from exc
        raise
    finally:
        con.close()


@contextmanager
def writer(loc: StoreLocation, *, timeout_s: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """The read-write connection one commit writes through; on leaving, the store is
    checkpointed and its file lock released, as by ``connection``.

    An embedded store is attached to the process's own database (``_attach``), which is
    never closed: a commit helper leaves with ``os._exit`` right after answering, without
    the ~10 ms teardown of a database instance. FSST is left out of the compression
    candidates: analysing it costs 16 ms of a small commit's 60 ms checkpoint, and on the
    trace and run tables (names that repeat) DuckDB chose Dictionary every time, so files
    came out the same size (docs/benchmarks.md, stop 19).
    """
    if loc.kind != "duckdb" or loc.path is None:
        with connection(loc, read_only=False, timeout_s=timeout_s) as con:
            yield con
        return
    with _attach_lock:
        con = open_with_retry(loc, read_only=False, timeout_s=timeout_s, attach=True)
        try:
            yield con
        finally:
            _detach(con)
