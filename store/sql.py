"""Values written into SQL text, for the statements that cannot bind parameters, and how
every DuckDB connection of the store is configured, file or lake.

duckdb 1.5.5 imports pandas (about 0.35 s) the first time a Python value is bound to a
statement (store/commit.py), so the commit path and the lake's setup splice the few values
they need (paths, URLs, names checked elsewhere) as quoted literals instead.
"""

from __future__ import annotations


def string_literal(value: str) -> str:
    """``value`` as a SQL string literal: a quote is doubled, nothing else is special
    (DuckDB reads backslashes in '...' literally)."""
    return "'" + value.replace("'", "''") + "'"


# Extensions come from pinned wheels only; never download or load one at run time.
NO_EXTENSION_LOADING = {
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
}
