"""Hand a run to a teammate: read one run's rows out of a store, and check rows coming in.

``export`` writes what ``run_tables`` returns; ``import`` checks incoming tables against the
schema THIS code writes (built by applying the migrations to an in-memory DuckDB), so a
file that could never commit is refused before it reaches the spool.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import duckdb

from store import bounds, migrate
from store.connect import connection
from store.location import StoreLocation
from store.renamed_tables import current_name, insert_sql

SKIP_TABLES = {"stepscope_schema"}


def run_tables(loc: StoreLocation, run_id: str) -> dict[str, Any] | None:
    """Every non-empty table's rows for ``run_id`` (``runs`` included) as pyarrow Tables.

    None when the store has no such run.
    """
    with connection(loc, read_only=True, timeout_s=30) as con:
        migrate.check_readable(con)
        names = [t for t in migrate.base_tables(con) if t not in SKIP_TABLES]
        found = con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
        if not found:
            return None
        tables = {}
        for name in names:  # names come from the store's own catalog
            table = con.execute(f"SELECT * FROM {name} WHERE run_id = ?", [run_id]).to_arrow_table()
            if table.num_rows or name == "runs":
                tables[name] = table
        return tables


@cache
def code_schema() -> dict[str, dict[str, str]]:
    """{table: {column: type}} of the schema this code's migrations create."""
    with duckdb.connect(":memory:") as con:  # closed on leaving the block
        migrate.upgrade(con)
        rows = con.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t USING (table_catalog, table_schema, table_name) "
            "WHERE t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position"
        ).fetchall()
    schema: dict[str, dict[str, str]] = {}
    for table, column, dtype in rows:
        if table not in SKIP_TABLES:
            schema.setdefault(table, {})[column] = dtype
    return schema


def check_against_schema(tables: dict[str, Any]) -> str | None:
    """Insert ``tables`` (pyarrow, no run_id) into an in-memory copy of the schema.

    Returns None when every row would commit, else one line saying which table and why.
    Nothing is executed but DuckDB's own typed INSERT of the given values.
    """
    schema = code_schema()
    with duckdb.connect(":memory:") as con:
        migrate.upgrade(con)
        for name, table in tables.items():
            target = current_name(name)  # an older export names a renamed table as it was
            if target not in schema or name == "runs":
                return f"table {name!r} is not part of this Stepscope's schema"
            unknown = [c for c in table.column_names if c not in schema[target]]
            if unknown and target == name:
                return f"table {name}: unknown column(s) {', '.join(unknown[:5])}"
            con.register("incoming", table)
            try:
                con.execute(insert_sql(name, "SELECT 'check'::VARCHAR AS run_id, * FROM incoming"))
                if problem := _implausible(con, target, table.column_names):
                    return f"table {name}: {problem}"
            except duckdb.Error as exc:
                return f"table {name}: rows do not fit the schema ({str(exc).splitlines()[0]})"
            finally:
                con.unregister("incoming")
    return None


def _implausible(con: duckdb.DuckDBPyConnection, table: str, columns: list[str]) -> str | None:
    """The first value of ``incoming`` outside its physical bound (store/bounds.py), said
    as ``column <why>``; None when every checked column is plausible."""
    for column, bound in bounds.COLUMNS.get(table, {}).items():
        if column not in columns:
            continue
        zero = "OR c = 0" if bound.zero_ok else ""
        found = con.execute(
            f'SELECT c FROM (SELECT "{column}" AS c FROM incoming) WHERE c IS NOT NULL AND NOT '
            f"((c >= ? AND c <= ?) {zero}) LIMIT 1", [bound.low, bound.high],
        ).fetchone()  # fmt: skip
        if found is not None:
            return f"{column} {bound.problem(found[0])}"
    return None
