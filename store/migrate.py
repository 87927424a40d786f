"""Numbered schema migrations: ``store/migrations/NNNN_name.sql``, applied in order.

Writers upgrade an older store before committing; readers never write and report a store
that is older or newer than this code in one plain sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from store.errors import StoreError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


@cache
def migrations() -> tuple[Migration, ...]:
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise StoreError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text()))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise StoreError(f"two migrations share a number in {MIGRATIONS_DIR}")
    return tuple(found)


def code_version() -> int:
    """The schema version this code writes and reads."""
    return max(m.version for m in migrations())


def applied_versions(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The migrations recorded in the store, ascending; empty for an empty database.

    Asks the table directly: information_schema costs ~80 ms per query on a DuckLake
    catalog, and this runs on every commit and every new data version.
    """
    try:
        row = con.execute("SELECT list(version ORDER BY version) FROM stepscope_schema").fetchone()
    except duckdb.CatalogException:
        return []
    return list(row[0] or [])


def base_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The base tables of the connection's current database and schema, sorted by name."""
    return [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "AND table_catalog = current_database() AND table_schema = current_schema() "
        "ORDER BY table_name"
    ).fetchall()]  # fmt: skip


def store_version(con: duckdb.DuckDBPyConnection) -> int:
    """The store's schema version: the newest migration up to which every one of this code's
    migrations is applied (0 for an empty database), or, when the store is newer than this
    code, its newest migration.

    Migrations are numbered when work starts and may land out of order (0011 committed
    before 0010): a store that has 0011 but not 0010 is at v9 and is upgraded by 0010.
    """
    applied = applied_versions(con)
    if applied and applied[-1] > code_version():
        return applied[-1]
    done = set(applied)
    version = 0
    for mig in migrations():
        if mig.version not in done:
            break
        version = mig.version
    return version


def upgrade(con: duckdb.DuckDBPyConnection) -> None:
    """Apply every migration the store lacks, in order, each in its own transaction."""
    done = set(applied_versions(con))
    ensure_not_newer(max(done, default=0))
    for mig in migrations():
        if mig.version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            if not done:  # an empty database: this is its first migration
                con.execute(
                    "CREATE TABLE IF NOT EXISTS stepscope_schema "
                    "(version INTEGER NOT NULL, name VARCHAR NOT NULL, "
                    "applied_at TIMESTAMP WITH TIME ZONE NOT NULL)"
                )
            con.execute(mig.sql)
            # Inline on purpose: both come from a file name checked by _NAME (digits; a-z0-9_),
            # and binding Python values makes duckdb import pandas (see store/commit.py).
            con.execute(
                f"INSERT INTO stepscope_schema VALUES ({mig.version:d}, '{mig.name}', now())"
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        done.add(mig.version)


def ensure_not_newer(version: int) -> None:
    if version > code_version():
        raise StoreError(
            f"the store has schema v{version}, newer than this Stepscope (v{code_version()}): "
            "upgrade Stepscope to read it"
        )


def check_readable(con: duckdb.DuckDBPyConnection) -> None:
    """Raise a plain StoreError unless this code can read the store as it is."""
    version = store_version(con)
    ensure_not_newer(version)
    if version < code_version():
        raise StoreError(
            f"the store has schema v{version}, older than this Stepscope (v{code_version()}): "
            "run `python -m collectors flush` once to upgrade it"
        )
