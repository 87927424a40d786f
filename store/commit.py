"""Commit spooled bundles: one transaction per run, keyed by run id, idempotent."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

import duckdb

from store import migrate
from store.connect import connection
from store.errors import StoreBusy, StoreError
from store.location import StoreLocation
from store.renamed_tables import current_name, insert_sql
from store.retry import retry
from store.spool.bundle import (
    DEFAULT_COMMIT_TIMEOUT_S,
    CommitResult,
    CorruptBundle,
    FlushReport,
    abandoned_temp_entries,
    move_aside,
    pending_entries,
    read_manifest,
)
from store.spool.claim import EntryClaim, EntryHeld, claim_entry
from store.sql import string_literal

log = logging.getLogger("stepscope.store")

# Environment keys copied into their own runs columns; the whole snapshot stays in `env`.
ENV_COLUMNS = (
    "hostname", "os", "cpu", "cpu_count", "mem_bytes", "python", "torch", "nccl",
    "cuda_driver", "cuda", "gpu_model", "gpu_count", "vllm", "stepscope_version",
)  # fmt: skip


def run_row(run: dict[str, Any]) -> dict[str, Any]:
    """The ``runs`` row of a manifest's run (``committed_at`` is added by the commit)."""
    env = run.get("env") or {}
    row = {"run_id": run["run_id"], "verb": run["verb"], "label": run.get("label"),
           "host": run["host"], "started_at": run["started_at"],
           "finished_at": run["finished_at"], "status": run["status"],
           "message": run.get("message"), **{k: env.get(k) for k in ENV_COLUMNS},
           "args": json.dumps(run.get("args") or {}, default=str),
           "env": json.dumps(env, default=str)}  # fmt: skip
    return {k: v if v is None or isinstance(v, str | int | float) else str(v)
            for k, v in row.items()}  # fmt: skip


def _create_run_row_table(con: duckdb.DuckDBPyConnection, run: dict[str, Any], folder: Path):
    """``spool_run``: the run row as a temporary table read from a file, so the commit binds
    no Python values. It is this connection's alone and never reaches the store; a table,
    not a view, so the file is read once rather than by every insert that names it.

    Why: duckdb 1.5.5 imports pandas (about 0.35 s) the first time any Python value is
    bound to a statement or turned into Arrow (it compares values with ``pandas.NA``), which
    would double a small import's time. The row is written as one JSON string (a string is
    never auto-detected as a date) and taken apart in SQL; store/reader.py's queries still
    bind their values as parameters.
    """
    row = run_row(run)
    path = folder / "run.json"
    path.write_text(json.dumps({"row": json.dumps(row)}))
    fields = ", ".join(f"json_extract_string(row, '$.{col}') AS {col}" for col in row)
    con.execute(f"CREATE OR REPLACE TEMP TABLE spool_run AS SELECT {fields} "
                f"FROM read_json({string_literal(str(path))}, format = 'newline_delimited')")  # fmt: skip


def _select_rows(entry: Path, info: dict[str, Any]) -> str:
    """The SELECT of one spooled table's rows with the run id (store/spool/bundle.py's formats).

    Only checked text reaches the SQL: read_manifest verified the file is in the entry and
    each JSON column is an identifier with one of store.spool.bundle.SQL_TYPES, and the table name
    is one. A JSON table is one object of column lists: unnest zips them into rows.
    """
    path = entry / info["file"]
    if path.suffix != ".json":
        return f"SELECT r.run_id, t.* FROM spool_run r, read_parquet({string_literal(str(path))}) t"
    columns = info["columns"]  # names quoted all the same: a column may be a keyword
    spec = ", ".join(f"'{name}': '{sql_type}[]'" for name, sql_type in columns)
    rows = ", ".join(f'unnest(t."{name}") AS "{name}"' for name, _ in columns)
    return (f"SELECT r.run_id, {rows} FROM spool_run r, read_json({string_literal(str(path))}, "
            f"columns = {{{spec}}}, format = 'unstructured', "
            f"maximum_object_size = {path.stat().st_size + 1:d}) t")  # fmt: skip


def commit_entry(
    loc: StoreLocation, entry: Path, timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S
) -> CommitResult:
    """Claim ``entry`` (waiting while another process holds it), commit it, remove it.

    An entry that is gone once claimed was committed by the process that held it. Raises
    what ``commit_claimed`` raises.
    """
    claim = claim_entry(entry, wait=True)
    if claim is None:
        return CommitResult(entry.name, inserted=False)
    with claim:
        return commit_claimed(loc, claim, timeout_s)


def commit_claimed(
    loc: StoreLocation, claim: EntryClaim, timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S
) -> CommitResult:
    """Commit a claimed spool entry whole or not at all, then remove it from the spool.

    Raises CorruptBundle (the caller, still holding the claim, moves it aside), StoreBusy
    (the entry stays) or StoreError. The claim is what keeps two processes from committing
    one entry at once; a run already in the store (a commit killed before the entry was
    removed) is not inserted twice.
    """
    entry = claim.entry
    manifest = read_manifest(entry)
    if loc.kind == "ducklake":  # optimistic commits: a conflicting transaction is retried
        exists = _retry_lake_conflicts(loc, entry, manifest, timeout_s)
    else:
        exists = _commit_once(loc, entry, manifest, timeout_s)
    shutil.rmtree(entry, ignore_errors=True)
    return CommitResult(manifest["run"]["run_id"], inserted=not exists)


def _commit_once(
    loc: StoreLocation, entry: Path, manifest: dict[str, Any], timeout_s: float
) -> bool:
    """One attempt: upgrade, then insert every table and the runs row in one transaction.

    Returns whether the run was already in the store.
    """
    run = manifest["run"]
    with tempfile.TemporaryDirectory(prefix="stepscope-commit-") as scratch, \
            connection(loc, read_only=False, timeout_s=timeout_s) as con:  # fmt: skip
        migrate.upgrade(con)
        # Each table file is named in its own statement: one bind per file. Relations (the
        # run id cross-joined with con.read_parquet) opened and bound each file about six
        # times: 52-57 ms against 27-29 ms for a small trace's five tables (issue 12).
        _create_run_row_table(con, run, Path(scratch))
        con.execute("BEGIN TRANSACTION")
        try:
            exists = con.execute(
                "SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM spool_run)"
            ).fetchone()[0]
            if not exists:
                for name, info in manifest["tables"].items():
                    if info.get("rows") == 0:
                        continue  # nothing to insert; each statement costs ~5 ms
                    con.execute(insert_sql(name, _select_rows(entry, info)))  # an old name too
                con.execute(
                    "INSERT INTO runs BY NAME SELECT *, now() AS committed_at FROM spool_run"
                )
            con.execute("COMMIT")
        except Exception as exc:
            # A failed COMMIT (a DuckLake conflict) has already ended the transaction; a
            # second error from ROLLBACK must not hide the first one.
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            # A table the store lacks is found here rather than looked up before every
            # commit (the catalog query was 5 ms of a small commit's 110, issue 12).
            if isinstance(exc, duckdb.CatalogException):
                known = set(migrate.base_tables(con))
                for name, info in manifest["tables"].items():
                    if info.get("rows") != 0 and current_name(name) not in known:
                        raise StoreError(f"bundle {entry.name} has table {name!r} that this "
                                         "store's schema lacks") from None
            raise
    return bool(exists)


def _retry_lake_conflicts(
    loc: StoreLocation, entry: Path, manifest: dict[str, Any], timeout_s: float
) -> bool:
    from store.lake.catalog import is_conflict

    def transient(exc: Exception) -> bool:
        conflict = isinstance(exc, duckdb.Error) and is_conflict(exc)
        if conflict:
            log.debug(f"lake conflict, retrying {entry.name}: {exc}")
        return conflict

    return retry(
        lambda: _commit_once(loc, entry, manifest, timeout_s),
        transient=transient,
        timeout_s=timeout_s,
        first_delay_s=0.05,
        give_up=lambda _exc: StoreBusy(
            f"store {loc.describe()} is busy: commits kept conflicting with other "
            f"writers for {timeout_s:g} s"
        ),
    )


def commit_then_flush(
    loc: StoreLocation, claim: EntryClaim, timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S
) -> tuple[CommitResult, FlushReport | None]:
    """Commit a collector's own claimed entry, then anything else waiting in the spool.

    The claim is released before the backlog. The backlog gets at most 5 s; a store still
    busy for it is not an error (None). What ``commit_claimed`` raises for the collector's
    own entry propagates.
    """
    with claim:
        result = commit_claimed(loc, claim, timeout_s)
    try:
        return result, flush(loc, timeout_s=min(timeout_s, 5.0))
    except StoreBusy:
        return result, None


def flush(loc: StoreLocation, timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S) -> FlushReport:
    """Commit every pending spool entry that no other live process holds; corrupt ones
    are moved aside with the reason.

    An entry another process holds (it is spooling or committing it) is left to it and
    named in ``held_elsewhere``; one that vanishes meanwhile was committed by its holder.
    StoreBusy propagates so the caller can exit 75 with the entries still pending.
    """
    spool = loc.spool_dir
    report = FlushReport([], [], [], [])
    for tmp in abandoned_temp_entries(spool):
        with _claim_or_skip(tmp, report) as claim:
            if claim is not None:
                target = move_aside(tmp, spool)
                report.moved_aside.append(
                    (tmp.name, "half-written by a process that died", str(target))
                )
    for entry in pending_entries(spool):
        with _claim_or_skip(entry, report) as claim:
            if claim is None:
                continue
            try:
                result = commit_claimed(loc, claim, timeout_s)
            except CorruptBundle as exc:  # nobody else holds it: it is really unreadable
                target = move_aside(entry, spool)
                report.moved_aside.append((entry.name, str(exc), str(target)))
                continue
            except StoreBusy:
                raise
            except StoreError as exc:
                report.failed.append((entry.name, str(exc)))
                continue
        (report.committed if result.inserted else report.already_present).append(result.run_id)
    return report


@contextmanager
def _claim_or_skip(entry: Path, report: FlushReport) -> Iterator[EntryClaim | None]:
    """The entry's claim for the block, or None when it is gone or held elsewhere."""
    try:
        claim = claim_entry(entry, wait=False)
    except EntryHeld:
        report.held_elsewhere.append(entry.name)
        claim = None
    with claim or nullcontext():  # the claim, when there is one, is released after the block
        yield claim
