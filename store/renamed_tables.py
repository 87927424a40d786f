"""Tables a migration renamed, so rows written under the old name still land.

A spool entry written before the upgrade, or an ``export`` made by an older Stepscope,
names the table as it was then. The commit and ``import``'s schema check both route such
rows through ``insert_sql``: the old columns, reshaped by one SELECT into the new table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenamedTable:
    new: str  # the table that holds these rows now
    select: str  # SELECT list over the old table's columns (run_id included) giving the new's


RENAMED_TABLES: dict[str, RenamedTable] = {
    # 0010: the engine from the family's prefix (vllm: / sglang:), vLLM's engine label kept
    # as engine_index (store/migrations/0010_serving_metrics.sql does the same to old rows).
    "vllm_metrics_samples": RenamedTable(
        "serving_metrics_samples",
        "* EXCLUDE (engine), split_part(metric, ':', 1) AS engine, engine AS engine_index",
    ),
}


def current_name(table: str) -> str:
    """The table that holds rows bundled under ``table`` today."""
    renamed = RENAMED_TABLES.get(table)
    return renamed.new if renamed else table


def insert_sql(table: str, rows_sql: str) -> str:
    """``INSERT ... BY NAME`` of ``rows_sql`` (rows of ``table`` as bundled) into its table."""
    renamed = RENAMED_TABLES.get(table)
    if renamed is None:
        return f"INSERT INTO {table} BY NAME {rows_sql}"
    return f"INSERT INTO {renamed.new} BY NAME SELECT {renamed.select} FROM ({rows_sql})"
