"""Typed JSON columns for a collector's plain tables (a dict of lists, a list of dicts).

Most collectors hand the spool a few rows of Python values. Turning them into Arrow makes
pyarrow import pandas (``pa.array`` asks whether a value is a pandas object, about 0.5 s),
which would be most of a small import's time. Where every column's values have one plain
type, the table is spooled as JSON columns instead, with the SQL type that the table read
back from pyarrow's Parquet has; any other table (nested values, numpy scalars, NaN or
infinity, ragged lists) returns None and stays Parquet, as before.
"""

from __future__ import annotations

import math
from typing import Any

INT64 = (-(1 << 63), (1 << 63) - 1)


def _sql_type(values: list[Any]) -> str | None:
    """The SQL type pyarrow infers for ``values`` (bool, int, float, str, None), or None."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:  # pyarrow's null type, which DuckDB reads from Parquet as INTEGER
        return "INTEGER"
    if kinds == {bool}:
        return "BOOLEAN"
    if kinds == {str}:
        return "VARCHAR"
    if kinds == {int}:
        return "BIGINT" if all(v is None or INT64[0] <= v <= INT64[1] for v in values) else None
    if kinds and kinds <= {int, float}:  # pyarrow widens a mix of int and float to double
        return "DOUBLE" if all(v is None or math.isfinite(v) for v in values) else None
    return None  # nested or foreign values


def _as_columns(table: Any) -> dict[str, list[Any]] | None:
    if isinstance(table, dict) and table and all(isinstance(v, list) for v in table.values()):
        if len({len(v) for v in table.values()}) != 1:
            return None  # ragged: pyarrow refuses it, so let it
        return table
    if isinstance(table, list) and table and all(isinstance(r, dict) for r in table):
        keys = list(table[0])
        if not keys or any(list(r) != keys for r in table):
            return None
        return {k: [r[k] for r in table] for k in keys}
    return None


def plain_columns(table: Any, max_rows: int) -> dict[str, tuple[str, list[Any]]] | None:
    """``{name: (SQL type, values)}`` of a plain table of 1 to ``max_rows`` rows, or None."""
    columns = _as_columns(table)
    if columns is None or not all(isinstance(name, str) for name in columns):
        return None
    typed: dict[str, tuple[str, list[Any]]] = {}
    for name, values in columns.items():
        if not 0 < len(values) <= max_rows or (sql_type := _sql_type(values)) is None:
            return None
        typed[name] = (sql_type, values)
    return typed
