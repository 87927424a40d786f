"""Named queries for the Policy page: kernel rows the trace policy checks need.

Reads the trace tables of migration 0002 (``trace_kernel_stats``) joined with ``v_runs``.
Every value is a bound parameter.
"""

from __future__ import annotations

import pandas as pd

from store.location import StoreLocation
from store.reader import query_df
from store.trace_vocab import COMM_SQL

# Rows the checks in planner/policy/trace_check.py can flag: collectives, quantize kernels, and
# kernels whose names say they communicate (some engines' collectives are not NCCL). The names
# are matched in a subquery of their own, where the pattern is a filter DuckDB pushes into the
# Parquet scan (the whole OR cannot be): 0.36 -> 0.12 CPU s over 479k rows at 10,000 runs.
_RELEVANT = (
    f"(k.category IN ({COMM_SQL}, 'cast_quant') OR k.name IN (SELECT DISTINCT name FROM "
    "trace_kernel_stats WHERE regexp_matches(name, '(?i)nccl|rccl|allreduce|all_reduce|"
    "reduce_scatter|quickreduce|quick_reduce|deep_?ep|dispatch|combine|cross_device_reduce|"
    "moe_a2a|all2all|alltoall')))"
)


def trace_runs(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """Runs that stored kernel statistics (trace imports, profiles), newest first.

    The statistics are counted per run first and then joined to the run rows: grouping the
    joined rows by every run column cost a quarter more at 3,000 runs. Every run's are
    counted, the host filtered after the join: a semi-join of the statistics with the host's
    runs cost more than the counting it saved (0.09 -> 0.055 CPU s at 10,000 runs).
    """
    return query_df(
        loc,
        "WITH k AS (SELECT run_id, count(DISTINCT rank) AS ranks, count(*) AS kernels "
        "FROM trace_kernel_stats GROUP BY run_id) "
        "SELECT r.run_id, r.verb, r.label, r.host, r.status, r.finished_at, k.ranks, k.kernels "
        "FROM v_runs r JOIN k USING (run_id) WHERE (?::VARCHAR IS NULL OR r.host = ?) "
        "ORDER BY r.finished_at DESC, r.run_id DESC",
        [host, host],
    )


def policy_kernel_rows(
    loc: StoreLocation, host: str | None = None, run_id: str | None = None
) -> pd.DataFrame:
    """Per run x rank x kernel: name, category, dtype, calls, total_us, for policy checks.

    Only the columns the checks read: a page turns every row into a Python dict, and a
    timestamp column per row cost two thirds of that (0.19 s of 12,000 rows at 3,000 runs);
    a run's host, label and age come from :func:`trace_runs` (the runs table is joined only
    to filter a host: sorting 100,000 rows by run time was a third of the query at 10,000
    runs).
    """
    return query_df(
        loc,
        "SELECT k.run_id, k.rank, k.name, k.category, k.dtype, k.calls, k.total_us "
        f"FROM trace_kernel_stats k WHERE {_RELEVANT} "
        "AND (?::VARCHAR IS NULL OR k.run_id IN (SELECT run_id FROM runs WHERE host = ?)) "
        "AND (?::VARCHAR IS NULL OR k.run_id = ?) "
        "ORDER BY k.run_id, k.rank, k.total_us DESC",
        [host, host, run_id, run_id],
    )


def quantize_before_collectives(
    loc: StoreLocation, host: str | None = None, run_id: str | None = None
) -> pd.DataFrame:
    """Per run x rank: kernels started right before a collective (from ``trace_kernels``).

    Columns: run_id, rank, name, category (of that kernel), comm_category, times (how many
    of the rank's collectives of that category it preceded), comm_calls (all of them).
    Only kernels of category ``cast_quant`` are returned; runs with no per-event rows are
    absent (see :func:`event_runs`). A window over every run's events is tens of seconds
    at 100M rows: pages call this for one ``run_id`` (the Policy page: the selected run).
    """
    return query_df(
        loc,
        "WITH k AS (SELECT run_id, rank, name, category, "
        "lag(name) OVER w AS prev_name, lag(category) OVER w AS prev_category "
        "FROM trace_kernels WHERE kind = 'kernel' "
        "AND run_id IN (SELECT run_id FROM v_runs WHERE (?::VARCHAR IS NULL OR host = ?)) "
        "AND (?::VARCHAR IS NULL OR run_id = ?) "
        "WINDOW w AS (PARTITION BY run_id, rank ORDER BY start_us, stream)), "
        "c AS (SELECT run_id, rank, category, count(*) AS comm_calls FROM k "
        f"WHERE category IN ({COMM_SQL}) GROUP BY ALL) "
        "SELECT k.run_id, k.rank, k.prev_name AS name, k.prev_category AS category, "
        "k.category AS comm_category, count(*) AS times, any_value(c.comm_calls) AS comm_calls "
        "FROM k JOIN c USING (run_id, rank, category) "
        f"WHERE k.category IN ({COMM_SQL}) AND k.prev_category = 'cast_quant' "
        "GROUP BY ALL ORDER BY k.run_id, k.rank, times DESC",
        [host, host, run_id, run_id],
    )


def event_runs(loc: StoreLocation, host: str | None = None) -> list[str]:
    """Runs whose per-event kernel table is stored (adjacency checks possible).

    Answered from the small per-rank table, not from ``trace_kernels`` (100M rows at scale):
    the trace collector writes every GPU event of a rank to ``trace_kernels`` and counts
    them in ``trace_ranks.kernels`` (kernels + memcpy + memset), so ``kernels > 0`` is the
    rank's GPU events being stored. (A rank of only memcpy/memset has no kernel to check.)
    """
    frame = query_df(
        loc,
        "SELECT DISTINCT run_id FROM trace_ranks WHERE kernels > 0 "
        "AND run_id IN (SELECT run_id FROM v_runs WHERE (?::VARCHAR IS NULL OR host = ?)) "
        "ORDER BY run_id",
        [host, host],
    )
    return frame["run_id"].tolist()
