"""``migrate --to URL``: copy every run of an embedded store into a lake (or another file).

All runs the target lacks go over in ONE transaction (all or nothing), table by table with
``INSERT ... BY NAME``, so column order never matters; runs already in the target are
skipped, which makes a re-run a no-op. Afterwards every table is counted on both sides for
the source's run ids and one line per table says what happened; any mismatch fails.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass

import duckdb

from collectors.core.context import Context
from collectors.core.errors import EXIT_FAILED, EXIT_OK, InputError
from store import migrate
from store.connect import connection, open_with_retry
from store.errors import StoreBusy, StoreError, StoreMissing
from store.location import StoreLocation, resolve
from store.retry import retry
from store.sql import string_literal

SRC = "stepscope_src"


@dataclass
class TableCopy:
    table: str
    source_rows: int
    copied_rows: int
    target_rows: int  # rows in the target for the source's runs, after the copy

    @property
    def ok(self) -> bool:
        return self.source_rows == self.target_rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", required=True, metavar="URL",
                        help="target store: ducklake:postgres:... URL (or a .duckdb path)")  # fmt: skip
    parser.add_argument("--data-path", metavar="DIR_OR_S3",
                        help="data path of a new lake (else ;data_path= in the URL or "
                        "$STEPSCOPE_LAKE_DATA_PATH)")  # fmt: skip


def _open_target(target: StoreLocation, timeout_s: float) -> duckdb.DuckDBPyConnection:
    if target.kind == "ducklake":
        from store.lake.catalog import open_private

        return open_private(target, read_only=False)
    return open_with_retry(target, read_only=False, timeout_s=timeout_s)


def _source_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? "
        "AND table_schema = 'main' AND table_type = 'BASE TABLE' "
        "AND table_name <> 'stepscope_schema' ORDER BY table_name = 'runs', table_name",
        [SRC],
    ).fetchall()
    return [r[0] for r in rows]  # runs last: a run appears only once its rows are in


def _prepare_source(source: StoreLocation, timeout_s: float) -> None:
    """The source must be readable by this code; an older one is upgraded first."""
    if source.kind != "duckdb":
        raise InputError(f"--store {source.describe()}: migrate copies from an embedded store "
                         "file; to move runs between lakes use export/import")  # fmt: skip
    if not source.file.is_file():
        raise InputError(f"--store {source.path}: no store there")
    with connection(source, read_only=True, timeout_s=timeout_s) as con:
        version = migrate.store_version(con)
    migrate.ensure_not_newer(version)
    if version < migrate.code_version():
        with connection(source, read_only=False, timeout_s=timeout_s) as con:
            migrate.upgrade(con)


def copy_store(source: StoreLocation, target: StoreLocation, timeout_s: float, dry_run: bool
               ) -> tuple[list[TableCopy], int]:  # fmt: skip
    """Copy the runs ``target`` lacks; return per-table counts and how many runs were new."""
    if dry_run:
        return _dry_run(source, target, timeout_s)
    _prepare_source(source, timeout_s)
    con = _open_target(target, timeout_s)
    try:
        migrate.upgrade(con)
        # the source file may be busy with a collector's commit for a moment
        attach = f"ATTACH {string_literal(str(source.file))} AS {SRC} (READ_ONLY)"
        retry(lambda: con.execute(attach),
              transient=lambda exc: isinstance(exc, duckdb.Error) and "lock" in str(exc).lower(),
              timeout_s=timeout_s, first_delay_s=0.2,
              give_up=lambda exc: StoreBusy(f"source store {source.describe()} is busy: {exc}"))
        return _copy(con, target, timeout_s)
    except duckdb.Error as exc:
        from store.lake.catalog import outage

        if (plain := outage(target, exc)) is None:
            raise
        # The copy is one transaction: nothing of it is visible, and a re-run copies it all.
        raise StoreBusy(f"{plain}; no run was copied: run this migrate again once it "
                        "answers") from exc  # fmt: skip
    finally:
        con.close()


def _dry_run(source: StoreLocation, target: StoreLocation, timeout_s: float
             ) -> tuple[list[TableCopy], int]:  # fmt: skip
    """What a copy would do, touching neither store (no upgrade, no catalog creation)."""
    if source.kind != "duckdb" or not source.file.is_file():
        raise InputError(f"--store {source.describe()}: no embedded store there")
    target_runs: set[str] = set()
    # StoreMissing: a new target, to which every run would be copied
    with contextlib.suppress(StoreMissing), \
            connection(target, read_only=True, timeout_s=timeout_s) as tcon:  # fmt: skip
        if migrate.store_version(tcon) > 0:
            target_runs = {r[0] for r in tcon.execute("SELECT run_id FROM runs").fetchall()}
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"ATTACH {string_literal(str(source.file))} AS {SRC} (READ_ONLY)")
        con.execute("CREATE TEMP TABLE present (run_id VARCHAR)")
        if target_runs:
            con.executemany("INSERT INTO present VALUES (?)", [[r] for r in target_runs])
        result, new_runs = [], None
        for table in _source_tables(con):
            src_n, todo = con.execute(
                f"SELECT count(*), count(*) FILTER (WHERE run_id NOT IN "
                f"(SELECT run_id FROM present)) FROM {SRC}.main.{table}"
            ).fetchone()
            result.append(TableCopy(table, src_n, todo, src_n - todo))
            new_runs = todo if table == "runs" else new_runs
        return result, new_runs or 0
    finally:
        con.close()


def _copy(con: duckdb.DuckDBPyConnection, target: StoreLocation, timeout_s: float
          ) -> tuple[list[TableCopy], int]:  # fmt: skip
    from store.lake.catalog import is_conflict

    tables = _source_tables(con)
    missing_tables = sorted(set(tables) - set(migrate.base_tables(con)))
    if missing_tables:
        raise StoreError(f"target {target.describe()} lacks table(s) {', '.join(missing_tables)}")

    def transaction() -> tuple[int, dict[str, int]]:
        con.execute("BEGIN TRANSACTION")
        try:
            new_runs = con.execute(
                f"SELECT count(*) FROM {SRC}.main.runs s "
                "WHERE NOT EXISTS (SELECT 1 FROM runs t WHERE t.run_id = s.run_id)"
            ).fetchone()[0]
            copied = {}
            for table in tables:  # names come from the source's catalog, checked above
                copied[table] = con.execute(
                    f"INSERT INTO {table} BY NAME SELECT * FROM {SRC}.main.{table} s "
                    f"WHERE s.run_id IN (SELECT run_id FROM {SRC}.main.runs r WHERE NOT EXISTS "
                    "(SELECT 1 FROM runs t WHERE t.run_id = r.run_id))"
                ).fetchone()[0]
            con.execute("COMMIT")
        except duckdb.Error:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT already ended it
                con.execute("ROLLBACK")
            raise
        return new_runs, copied

    new_runs, copied = retry(transaction, transient=lambda exc: target.kind == "ducklake"
                             and isinstance(exc, duckdb.Error) and is_conflict(exc),
                             timeout_s=timeout_s, first_delay_s=0.2)  # fmt: skip
    result = []
    for table in tables:
        src_n = con.execute(f"SELECT count(*) FROM {SRC}.main.{table}").fetchone()[0]
        dst_n = con.execute(
            f"SELECT count(*) FROM {table} WHERE run_id IN (SELECT run_id FROM {SRC}.main.runs)"
        ).fetchone()[0]
        result.append(TableCopy(table, src_n, copied[table], dst_n))
    return result, new_runs


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = resolve(args.to, data_path=args.data_path)
    if target.url == ctx.loc.url:
        raise InputError(f"--to {target.describe()}: the target is the source store")
    try:
        tables, new_runs = copy_store(ctx.loc, target, ctx.commit_timeout, args.dry_run)
    except StoreMissing as exc:
        raise InputError(str(exc)) from None
    verb = "would copy" if args.dry_run else "copied"
    for t in tables:
        state = "ok" if t.ok or args.dry_run else "MISMATCH"
        ctx.log.info(f"{t.table}: {t.source_rows} row(s) in source, {verb} {t.copied_rows}, "
                     f"{t.target_rows} in target for these runs [{state}]")  # fmt: skip
    bad = [t.table for t in tables if not t.ok and not args.dry_run]
    if bad:
        ctx.log.error(f"row counts differ for {', '.join(bad)}; the target keeps what committed")
    else:
        ctx.log.info(f"{verb} {new_runs} new run(s) from {ctx.loc.describe()} to "
                     f"{target.describe()}")  # fmt: skip
    ctx.emit({
        "target": target.describe(), "new_runs": new_runs, "dry_run": bool(args.dry_run),
        "tables": {t.table: {"source": t.source_rows, "copied": t.copied_rows,
                             "target": t.target_rows} for t in tables},
        "ok": not bad,
    })  # fmt: skip
    return EXIT_FAILED if bad else EXIT_OK
