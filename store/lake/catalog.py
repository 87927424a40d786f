"""The DuckLake backend: a catalog in PostgreSQL, data files on shared storage.

A store URL ``ducklake:postgres:dbname=stepscope host=db port=5432 user=stepscope`` selects
it; the data path (a local/NFS directory or ``s3://bucket/prefix/``) comes from
``--data-path``, a ``;data_path=...`` suffix on the URL, or ``STEPSCOPE_LAKE_DATA_PATH``. It is
needed only when the catalog is created: later opens read it from the catalog.

Extensions come from the pinned ``duckdb-extension-*`` wheels, installed into a private
extension directory from the wheel's file and never downloaded (autoinstall/autoload off).
Loading them costs ~0.2 s, so each process keeps ONE in-memory DuckDB per (URL, mode) with
the lake attached, and every ``open_lake`` returns a fresh cursor on it. That holds no file
lock (the catalog is PostgreSQL, which takes many writers), and each transaction sees the
latest snapshot, so caching the instance never hides new commits.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
from pathlib import Path

import duckdb

from store import settings
from store.errors import StoreBusy, StoreError, StoreMissing
from store.lake import s3
from store.location import StoreLocation, lake_catalog, redact, refuse_credentials
from store.retry import retry
from store.sql import NO_EXTENSION_LOADING, string_literal

ALIAS = "lake"
_INIT_RACE_TIMEOUT_S = 20.0  # writers creating one new catalog (8 hosts on 2 busy cores: >3 s)
_instances: dict[tuple[str, str | None, bool], duckdb.DuckDBPyConnection] = {}
_lock = threading.Lock()
_data_paths: dict[str, str | None] = {}  # the data path each lake's catalog names


def extension_dir() -> Path:
    """Where the wheel's extension files are installed for DuckDB to load (per user)."""
    value = os.environ.get(settings.DUCKDB_EXTENSION_DIR.name)
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stepscope" / "duckdb-extensions"


def _load(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Install ``name`` from its pinned wheel (a local file copy, once) and load it."""
    version = con.execute("PRAGMA version").fetchone()[0]
    try:
        module = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise StoreError(
            f"DuckDB extension {name!r} is not installed: pip install -r requirements.txt "
            f"(duckdb-extension-{name})"
        ) from None
    wheel_file = Path(module.__file__).parent / "extensions" / version / f"{name}.duckdb_extension"
    if not wheel_file.is_file():
        raise StoreError(f"duckdb-extension-{name} has no build for DuckDB {version}")
    with contextlib.suppress(duckdb.Error):  # not installed in this extension directory yet
        con.execute(f"LOAD {name}")
        return
    con.execute(f"INSTALL {string_literal(str(wheel_file))}")
    con.execute(f"LOAD {name}")


def is_remote(data_path: str | None) -> bool:
    return s3.is_object_store(data_path)


def _new_instance(loc: StoreLocation, read_only: bool) -> duckdb.DuckDBPyConnection:
    ext_dir = extension_dir()
    ext_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(
        ":memory:", config={**NO_EXTENSION_LOADING, "extension_directory": str(ext_dir)}
    )
    try:
        catalog = lake_catalog(loc.url)
        _load(con, "ducklake")
        if catalog.startswith("postgres:"):
            _load(con, "postgres")
        refuse_credentials(loc.data_path)
        if is_remote(loc.data_path):
            _load(con, "httpfs")
        suffix = ""  # at most one ATTACH option: a reader never names the data path
        if read_only:
            suffix = " (READ_ONLY)"
        elif loc.data_path:
            suffix = f" (DATA_PATH {string_literal(loc.data_path)})"
        attach = f"ATTACH {string_literal('ducklake:' + catalog)} AS {ALIAS}{suffix}"
        try:
            con.execute(attach)
        except duckdb.Error as exc:
            # A lake on S3 opened by its URL alone: only the catalog knows the data path.
            # Loading httpfs up front would cost every local lake ~0.3 s per process.
            if "requires the extension httpfs" not in str(exc):
                raise
            _load(con, "httpfs")
            con.execute(attach)
        data_path = con.execute(f"SELECT data_path FROM ducklake_settings('{ALIAS}')").fetchone()
        _data_paths[loc.url] = data_path[0] if data_path else loc.data_path
        if is_remote(_data_paths[loc.url]):
            s3.create_secret(con, _data_paths[loc.url], _load)
    except BaseException as exc:
        con.close()
        if isinstance(exc, duckdb.Error):
            raise _plain_error(loc, exc) from exc
        raise
    return con


def _plain_error(loc: StoreLocation, exc: duckdb.Error) -> StoreError:
    # DuckLake's own words may quote the catalog's connection string (password= and all).
    text = redact(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__
    if "does not match existing data path" in str(exc):
        return StoreError(
            f"lake {loc.describe()}: the data path {redact(loc.data_path or '')!r} differs from "
            "the one the catalog was created with; drop --data-path/STEPSCOPE_LAKE_DATA_PATH or fix it"
        )
    if "creating a new DuckLake is explicitly disabled" in text:
        return StoreMissing(f"no lake at {loc.describe()} yet: run a collector first")
    if "data_path is not set" in text:
        return StoreError(
            f"lake {loc.describe()} does not exist yet and needs a data path to create it: "
            "add ;data_path=DIR_OR_S3_URL to the URL or set STEPSCOPE_LAKE_DATA_PATH"
        )
    reason = _pg_reason(str(exc))
    if reason is not None:
        reason = redact(reason)
        if any(m in reason.lower() for m in _UNREACHABLE):
            # A temporary outage: exit 75, the run waits in the spool for the next flush.
            return StoreBusy(f"lake catalog {loc.describe()} is unreachable: {reason}")
        return StoreError(f"lake catalog {loc.describe()} refused the connection: {reason}")
    return StoreError(f"cannot open lake {loc.describe()}: {text}")


_UNREACHABLE = (
    "connection refused", "timeout expired", "timed out", "no route to host",
    "could not translate host name", "server closed the connection", "network is unreachable",
    "the database system is starting up", "the database system is shutting down",
    "too many clients",
)  # fmt: skip


# libpq's words for a catalog connection that died under a statement (a restart, a kill).
_CATALOG_LOST = (
    "server closed the connection", "terminating connection", "no connection to the server",
    "could not receive data from server", "could not send data to server",
    "connection has been closed",
    "ssl syscall error", "the database system is in recovery mode", "connection refused",
    "the database system is shutting down", "the database system is starting up",
)  # fmt: skip


def outage(loc: StoreLocation, exc: BaseException) -> StoreError | None:
    """A lake's service failing under a statement, as one line: its catalog (PostgreSQL)
    went away, or its object storage is unreachable or refuses. None for anything else.

    Both are StoreBusy (exit 75, the run kept in the spool for the next ``flush``); the
    process's cached instance is dropped, so the next open reconnects.
    """
    if loc.kind != "ducklake" or not isinstance(exc, duckdb.Error):
        return None
    text = " ".join(str(exc).split())
    lost = any(m in text.lower() for m in _CATALOG_LOST)
    if lost and "http" not in text.lower():  # httpfs says "connection refused" too
        reset(loc)
        reason = _pg_reason(str(exc)) or text[:300]
        return StoreBusy(f"lake catalog {loc.describe()} went away: {redact(reason)}")
    data_path = _data_paths.get(loc.url) or loc.data_path
    if not is_remote(data_path):
        return None
    try:
        endpoint = s3.endpoint()
    except StoreError:
        endpoint = None
    found = s3.outage(data_path, endpoint, exc)
    if found is not None:
        reset(loc)
    return found


def _pg_reason(text: str) -> str | None:
    """libpq's own words from DuckDB's long 'Unable to connect to Postgres' message."""
    match = re.search(r'Unable to connect to Postgres at "[^"]*": (.*)', text, re.S)
    if not match:
        return None
    reason = re.sub(r'^connection to server at "[^"]*", port \d+ failed:\s*', "", match[1])
    return " ".join(reason.replace("FATAL:", "").split())


def _instance(loc: StoreLocation, read_only: bool) -> duckdb.DuckDBPyConnection:
    key = (loc.url, loc.data_path, read_only)
    with _lock:
        con = _instances.get(key)
        if con is None:
            # Two writers creating a new catalog at once: PostgreSQL rejects the second's
            # CREATE TABLEs; by the retry the catalog exists and opens.
            con = retry(lambda: _new_instance(loc, read_only), transient=_init_race,
                        timeout_s=_INIT_RACE_TIMEOUT_S, first_delay_s=0.2)  # fmt: skip
            _instances[key] = con
        return con


def _init_race(exc: BaseException) -> bool:
    cause = str(exc.__cause__ or exc)
    return "Failed to initialize DuckLake" in cause and (
        "duplicate key" in cause or "already exists" in cause
    )


def reset(loc: StoreLocation | None = None) -> None:
    """Drop cached instances (all, or one URL's): the next open reconnects from scratch.

    Dropped, not closed: closing a connection closes the cursors made from it, and another
    thread (a dashboard session) may be reading through one. DuckDB keeps the database alive
    while a cursor holds it and releases it, catalog connection included, when the last
    one closes.
    """
    with _lock:
        for key in [k for k in _instances if loc is None or k[0] == loc.url]:
            del _instances[key]


def open_lake(loc: StoreLocation, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A cursor with ``USE lake`` done, so unqualified table names mean the lake's tables."""
    for attempt in (1, 2):
        try:
            con = _instance(loc, read_only)
            with _lock:  # one cursor per caller; creating them is serialised (threads)
                cursor = con.cursor()
            cursor.execute(f"USE {ALIAS}")
            return cursor
        except duckdb.Error as exc:
            reset(loc)  # a dead catalog connection: retry once from a fresh instance
            if attempt == 2:
                raise _plain_error(loc, exc) from exc
    raise AssertionError("unreachable")


_thread = threading.local()  # this thread's read cursor per lake URL, with its instance


def read_cursor(loc: StoreLocation) -> duckdb.DuckDBPyConnection:
    """This thread's read-only cursor on the lake (``USE lake`` done), kept for its next
    reads: a fresh cursor per query paid its set-up and ``USE`` (a catalog transaction) each
    time, a fifth of a page's ~20 small reads at 10,000 runs. Remade once ``reset`` dropped
    its instance; the caller drops it after an error (:func:`drop_read_cursor`)."""
    cursors = _thread.__dict__.setdefault("cursors", {})
    key = (loc.url, loc.data_path, True)
    held = cursors.get(loc.url)
    with _lock:
        current = _instances.get(key)
    if held is not None and held[0] is current:
        return held[1]
    cursor = open_lake(loc, True)
    with _lock:
        cursors[loc.url] = (_instances.get(key), cursor)
    return cursor


def drop_read_cursor(loc: StoreLocation) -> None:
    held = _thread.__dict__.get("cursors", {}).pop(loc.url, None)
    if held is not None:
        with contextlib.suppress(duckdb.Error):
            held[1].close()


def lake_data_version(loc: StoreLocation) -> str:
    """The catalog's latest snapshot id: changes with every commit, costs one catalog query."""
    for attempt in (1, 2):
        try:
            con = _instance(loc, True)
            with _lock:
                cursor = con.cursor()
            with cursor:  # closed on leaving the block
                snap = cursor.execute(f"SELECT id FROM ducklake_current_snapshot('{ALIAS}')")
                snapshot = snap.fetchone()[0]
                if _rewritten_since(cursor, loc, snapshot):
                    reset(loc)  # the next open attaches afresh
                return f"snapshot:{snapshot}"
        except duckdb.Error as exc:
            reset(loc)
            if attempt == 2:
                raise _plain_error(loc, exc) from exc
    raise AssertionError("unreachable")


# What an ordinary commit records in a snapshot's ``changes``; anything else (compact's
# flushed_inlined, merge_adjacent, a rewrite) rewrote files under the readers.
_COMMIT_CHANGES = (
    "schemas_created", "tables_created", "tables_altered", "tables_dropped", "views_created",
    "views_dropped", "tables_inserted_into", "tables_deleted_from", "inlined_insert",
    "inlined_delete",
)  # fmt: skip
_seen_snapshots: dict[str, int] = {}


def _rewritten_since(cursor: duckdb.DuckDBPyConnection, loc: StoreLocation, snapshot: int) -> bool:
    """Whether compaction ran since this process last looked (or that snapshot expired).

    DuckLake 1.5.5 keeps per-instance metadata that a compaction by another process
    invalidates: the instance's next query of a compacted table failed with "INTERNAL Error:
    Attempted to access index 0 within vector of size 0" (with --keep-days 7) or "Current
    transaction is aborted" (0), found by benchmarks/scale/fleet.py; a fresh instance reads
    it fine. One catalog query, only when the snapshot moved.
    """
    last = _seen_snapshots.get(loc.url)
    _seen_snapshots[loc.url] = snapshot
    if last is None or last == snapshot:
        return False
    rows = cursor.execute(
        f"SELECT snapshot_id, map_keys(changes) FROM ducklake_snapshots('{ALIAS}') "
        "WHERE snapshot_id >= ?",
        [last],
    ).fetchall()
    if not rows or rows[0][0] != last:
        return True  # the snapshot this instance read from has been expired
    return any(key not in _COMMIT_CHANGES for _id, keys in rows[1:] for key in keys)


def is_conflict(exc: BaseException) -> bool:
    """A DuckLake optimistic-concurrency conflict that a retry of the transaction can clear.

    Besides DuckLake's own conflicts, two writers upgrading a lake at once race on the
    migrations: the later one's CREATE finds the table the earlier one just committed. On
    the retry the schema version is read again and that migration is skipped.
    """
    text = str(exc).lower()
    if isinstance(exc, duckdb.CatalogException) and "already exists" in text:
        return True
    return isinstance(exc, duckdb.TransactionException) or "conflict" in text


def open_private(loc: StoreLocation, read_only: bool) -> duckdb.DuckDBPyConnection:
    """An uncached instance with the lake attached and in use, for work that ATTACHes more
    databases (migrate, export); the caller closes it."""
    con = _new_instance(loc, read_only)
    con.execute(f"USE {ALIAS}")
    return con
