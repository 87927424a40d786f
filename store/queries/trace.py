"""Named queries for the Kernel breakdown page (tables of migrations 0002 and 0006).

Every value is a bound parameter. "Per step" figures average over every (rank, step) pair
of a run, so a category absent from a step counts as zero there; percentages are of the
summed step wall time.
"""

from __future__ import annotations

import pandas as pd

from store.location import StoreLocation
from store.reader import query_df
from store.trace_vocab import CATEGORIES, COMM_SQL

__all__ = ["CATEGORIES"]  # the taxonomy's order, for pages/kernels.py (store/trace_vocab.py)


def trace_runs(loc: StoreLocation) -> pd.DataFrame:
    """Runs with a trace breakdown (``trace`` imports and ``profile`` runs), newest first."""
    return query_df(
        loc,
        "SELECT r.run_id, r.verb, r.label, r.host, r.status, r.message, r.finished_at, "
        "t.ranks, t.steps, t.world_size, t.backend, t.device_name, t.partial, t.has_gpu, "
        "t.graph_kernels, t.gpu_events, t.step_source "
        "FROM v_runs r JOIN (SELECT run_id, count(*) AS ranks, max(steps) AS steps, "
        "max(world_size) AS world_size, any_value(backend) AS backend, "
        "any_value(device_name) AS device_name, bool_or(partial) AS partial, "
        "bool_or(has_gpu) AS has_gpu, sum(graph_kernels) AS graph_kernels, "
        "sum(kernels) AS gpu_events, any_value(step_source) AS step_source "
        "FROM trace_ranks GROUP BY run_id) t USING (run_id) "
        "ORDER BY r.finished_at DESC, r.run_id DESC",
    )


def ranks(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """One row per rank: file, source of its rank number, busy/idle/span/exposed comm."""
    return query_df(
        loc,
        "SELECT rank, file, partial, rank_source, world_size, backend, nccl_version, "
        "device_name, has_gpu, events_total, events_kept, kernels, steps, step_source, busy_us, "
        "idle_us, span_us, comm_us, exposed_comm_us, graph_launches, graph_kernels, "
        "outside_calls, outside_us FROM trace_ranks WHERE run_id = ? ORDER BY rank",
        [run_id],
    )


def rank_categories(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Per rank x category: mean calls and microseconds per step."""
    return query_df(
        loc,
        "WITH n AS (SELECT rank, count(*) AS steps FROM trace_steps WHERE run_id = ? "
        "GROUP BY rank) "
        "SELECT c.rank, c.category, sum(c.calls) / any_value(n.steps) AS calls_per_step, "
        "sum(c.total_us) / any_value(n.steps) AS us_per_step, sum(c.total_us) AS total_us "
        "FROM trace_step_categories c JOIN n USING (rank) WHERE c.run_id = ? "
        "GROUP BY c.rank, c.category ORDER BY c.rank, us_per_step DESC",
        [run_id, run_id],
    )


def steps(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Every step of every rank: name, where its boundary came from, wall and busy time."""
    return query_df(
        loc,
        "SELECT rank, step, name, source, start_us, wall_us, busy_us, context_tokens, "
        "generation_tokens FROM trace_steps WHERE run_id = ? ORDER BY rank, step",
        [run_id],
    )


def step_categories(loc: StoreLocation, run_id: str, rank: int | None = None) -> pd.DataFrame:
    """Per step x category: microseconds and calls, for one rank or averaged over ranks."""
    return query_df(
        loc,
        "WITH s AS (SELECT rank, step, wall_us FROM trace_steps WHERE run_id = ? "
        "AND (?::INTEGER IS NULL OR rank = ?)), "
        "nr AS (SELECT step, count(*) AS ranks, avg(wall_us) AS wall_us FROM s GROUP BY step) "
        "SELECT c.step, c.category, sum(c.total_us) / any_value(nr.ranks) AS us, "
        "sum(c.calls) / any_value(nr.ranks) AS calls, any_value(nr.wall_us) AS wall_us "
        "FROM trace_step_categories c JOIN s USING (rank, step) JOIN nr USING (step) "
        "WHERE c.run_id = ? GROUP BY c.step, c.category ORDER BY c.step, us DESC",
        [run_id, rank, rank, run_id],
    )


def category_summary(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Per category over the run: calls/step, mean us per call, us/step, % of step wall.

    The numbers of the sentence "allreduce: N calls/step, X us avg, Y% of step"; also
    carries the collective's dtypes (comma-separated) where the kernels name one.
    """
    return query_df(
        loc,
        "WITH s AS (SELECT count(*) AS rank_steps, sum(wall_us) AS wall FROM trace_steps "
        "WHERE run_id = ?), "
        "c AS (SELECT category, sum(calls) AS calls, sum(total_us) AS total_us "
        "FROM trace_step_categories WHERE run_id = ? GROUP BY category), "
        "d AS (SELECT category, string_agg(DISTINCT dtype, ', ' ORDER BY dtype) AS dtypes "
        "FROM trace_kernel_stats WHERE run_id = ? AND dtype IS NOT NULL AND dtype <> '' "
        "GROUP BY category) "
        "SELECT c.category, c.calls / s.rank_steps AS calls_per_step, "
        "c.total_us / nullif(c.calls, 0) AS avg_us, c.total_us / s.rank_steps AS us_per_step, "
        "100 * c.total_us / nullif(s.wall, 0) AS pct_of_step, s.wall / s.rank_steps AS step_us, "
        f"c.category IN ({COMM_SQL}) AS is_comm, d.dtypes "
        "FROM c CROSS JOIN s LEFT JOIN d USING (category) WHERE s.rank_steps > 0 "
        "ORDER BY c.total_us DESC",
        [run_id, run_id, run_id],
    )


def top_kernels(loc: StoreLocation, run_id: str, limit: int = 25) -> pd.DataFrame:
    """Kernels (or top-level CPU ops) by total time, summed over ranks; ``short_name``: an
    nsys export's shortName for the kernel (NULL for Kineto traces)."""
    return query_df(
        loc,
        "SELECT name, any_value(short_name) AS short_name, category, "
        "string_agg(DISTINCT dtype, ', ') AS dtype, "
        "sum(calls) AS calls, sum(total_us) AS total_us, "
        "sum(total_us) / nullif(sum(calls), 0) AS avg_us, min(min_us) AS min_us, "
        "max(max_us) AS max_us, count(DISTINCT rank) AS ranks "
        "FROM trace_kernel_stats WHERE run_id = ? "
        "GROUP BY name, category ORDER BY total_us DESC, name LIMIT ?",
        [run_id, int(limit)],
    )


def collective_dtypes(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Communication kernels by category and dtype: calls, time, distinct kernel names."""
    return query_df(
        loc,
        "SELECT category, coalesce(nullif(dtype, ''), 'unknown') AS dtype, "
        "sum(calls) AS calls, sum(total_us) AS total_us, count(DISTINCT name) AS kernels, "
        "string_agg(DISTINCT name, ', ') AS names "
        f"FROM trace_kernel_stats WHERE run_id = ? AND category IN ({COMM_SQL}) "
        "GROUP BY ALL ORDER BY total_us DESC",
        [run_id],
    )


def compare_categories(loc: StoreLocation, run_a: str, run_b: str) -> pd.DataFrame:
    """Two runs side by side: us/step and calls/step per category, and the delta B - A.

    Includes a ``(step wall)`` row with the mean step wall time of each run.
    """
    return query_df(
        loc,
        f"WITH s AS (SELECT run_id, count(*) AS rank_steps, avg(wall_us) AS wall_us "
        f"FROM {_two_runs('trace_steps', 'run_id, wall_us')} GROUP BY run_id), "
        "c AS (SELECT c.run_id, c.category, sum(c.total_us) / any_value(s.rank_steps) AS us, "
        "sum(c.calls) / any_value(s.rank_steps) AS calls "
        f"FROM {_two_runs('trace_step_categories', 'run_id, category, total_us, calls')} c "
        "JOIN s USING (run_id) GROUP BY c.run_id, c.category "
        "UNION ALL SELECT run_id, '(step wall)', wall_us, NULL FROM s), "
        "a AS (SELECT * FROM c WHERE run_id = ?), b AS (SELECT * FROM c WHERE run_id = ?) "
        "SELECT coalesce(a.category, b.category) AS category, "
        "coalesce(a.us, 0) AS a_us_per_step, coalesce(b.us, 0) AS b_us_per_step, "
        "coalesce(b.us, 0) - coalesce(a.us, 0) AS delta_us_per_step, "
        "a.calls AS a_calls_per_step, b.calls AS b_calls_per_step "
        "FROM a FULL OUTER JOIN b USING (category) "
        "ORDER BY category = '(step wall)' DESC, greatest(a_us_per_step, b_us_per_step) DESC",
        [run_a, run_b, run_a, run_a, run_b, run_a, run_a, run_b],
    )


def _two_runs(table: str, columns: str) -> str:
    """``table``'s rows of two runs (parameters: run A, run B, run A; B = A gives A's once).

    One equality per run: DuckDB skips the row groups of other runs by their min/max run id,
    which ``run_id IN (?, ?)`` did not (it read all 7.7M rows of ``trace_step_categories``
    at 10,000 runs: 0.22 CPU s, 0.04 s this way)."""
    return (f"(SELECT {columns} FROM {table} WHERE run_id = ? UNION ALL "
            f"SELECT {columns} FROM {table} WHERE run_id = ? AND run_id <> ?)")  # fmt: skip


def outside_steps(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """GPU events launched outside every step, per category, summed over ranks."""
    return query_df(
        loc,
        "SELECT category, sum(calls) AS calls, sum(total_us) AS total_us "
        "FROM trace_outside_categories WHERE run_id = ? GROUP BY category "
        "ORDER BY total_us DESC, category",
        [run_id],
    )


def event_counts(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """One row: the run's GPU events (NULL for a CPU-only trace, whose unit is the top-level
    CPU op), those counted in steps and those outside them; in_steps + outside = events.
    ``accounted`` is false for runs imported before migration 0006 (no outside bucket)."""
    return query_df(
        loc,
        "SELECT (SELECT CASE WHEN bool_or(has_gpu) THEN sum(kernels) END FROM trace_ranks "
        "WHERE run_id = ?) AS events, "
        "(SELECT coalesce(sum(calls), 0) FROM trace_step_categories WHERE run_id = ?) "
        "AS in_steps, "
        "(SELECT coalesce(sum(calls), 0) FROM trace_outside_categories WHERE run_id = ?) "
        "AS outside, "
        "(SELECT bool_and(outside_calls IS NOT NULL) FROM trace_ranks WHERE run_id = ?) "
        "AS accounted",
        [run_id, run_id, run_id, run_id],
    )


def comm_sources_per_step(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Step anatomy: collectives inside steps by category and issuing module (source:
    attention | moe | mlp | embedding | logits | other), per step and rank as
    ``category_summary`` counts them: calls_per_step, us_per_step, pct_of_step (of the mean
    step wall), plus step_us. "MoE AllReduce: 60 calls/step, 4.68 ms (21.6% of step)" is
    the row (allreduce, moe). Empty for runs imported before migration 0006."""
    return query_df(
        loc,
        "WITH s AS (SELECT count(*) AS rank_steps, sum(wall_us) AS wall FROM trace_steps "
        "WHERE run_id = ?), "
        "c AS (SELECT category, source, sum(calls) AS calls, sum(total_us) AS total_us "
        "FROM trace_comm_sources WHERE run_id = ? AND in_steps GROUP BY category, source) "
        "SELECT c.category, c.source, c.calls / s.rank_steps AS calls_per_step, "
        "c.total_us / s.rank_steps AS us_per_step, "
        "100 * c.total_us / nullif(s.wall, 0) AS pct_of_step, s.wall / s.rank_steps AS step_us "
        "FROM c CROSS JOIN s WHERE s.rank_steps > 0 ORDER BY c.total_us DESC, c.category, c.source",
        [run_id, run_id],
    )
