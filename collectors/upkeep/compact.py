"""``compact``: keep a lake fast as commits pile up (a no-op CHECKPOINT on an embedded store).

Every commit adds a DuckLake snapshot and, for tables over the inlining limit, small Parquet
files. Daily compaction moves inlined rows out of the catalog, merges adjacent small files,
expires snapshots older than ``--keep-days`` and deletes the files nothing refers to any
more. Rows are never changed: the run and row counts are the same before and after.
"""

from __future__ import annotations

import argparse
import time

import duckdb

from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError

STEPS = (
    ("flush inlined rows to Parquet", "CALL ducklake_flush_inlined_data('lake')"),
    ("merge adjacent small files", "CALL ducklake_merge_adjacent_files('lake')"),
    ("expire old snapshots",
     "CALL ducklake_expire_snapshots('lake', older_than => now() - to_days(?::INTEGER))"),
    ("delete unreferenced files",
     "CALL ducklake_cleanup_old_files('lake', older_than => now() - to_days(?::INTEGER))"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-days", type=int, default=7, metavar="N",
                        help="keep snapshots (time travel) of the last N days (default 7)")  # fmt: skip


def run(args: argparse.Namespace, ctx: Context) -> int:
    from store.connect import connection
    from store.lake.catalog import is_conflict, open_private, outage

    if args.keep_days < 0:
        raise InputError(f"--keep-days {args.keep_days}: give 0 or more days")
    if ctx.loc.kind != "ducklake":
        with connection(ctx.loc, read_only=False, timeout_s=ctx.commit_timeout) as con:
            con.execute("CHECKPOINT")
        ctx.log.info(f"checkpointed {ctx.loc.describe()} (an embedded store needs nothing more)")
        ctx.emit({"store": ctx.loc.describe(), "steps": ["checkpoint"]})
        return EXIT_OK
    if args.dry_run:
        ctx.log.info("dry run: nothing compacted")
        ctx.emit({"store": ctx.loc.describe(), "dry_run": True})
        return EXIT_OK
    con = open_private(ctx.loc, read_only=False)
    done = []
    try:
        for label, sql in STEPS:
            params = [args.keep_days] if "?" in sql else []
            deadline = time.monotonic() + ctx.commit_timeout
            while True:
                try:
                    # Arrow, not fetchall: these return TIMESTAMPTZ columns (pytz-free)
                    rows = con.execute(sql, params).to_arrow_table().num_rows
                    break
                except duckdb.Error as exc:
                    if (plain := outage(ctx.loc, exc)) is not None:
                        raise plain from exc  # its bucket or catalog unavailable: exit 75
                    if not is_conflict(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)  # a collector committed meanwhile: try again
            ctx.log.info(f"{label}: {rows} item(s)")
            done.append({"step": label, "items": rows})
    finally:
        con.close()
    ctx.emit({"store": ctx.loc.describe(), "steps": done})
    return EXIT_OK
