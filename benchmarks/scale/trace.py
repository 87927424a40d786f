"""Trace tables of the scale store: per-event ``trace_kernels`` and the aggregates over them.

Each trace-bearing run (``trace``, ``profile``, ``vllm-profile``) is generated on its own, as
a commit would write it: its events go to a TEMP table from ``range()`` x a kernel template,
then ``trace_kernels`` and the aggregate tables (ranks, steps, step categories, kernel
statistics) are filled from that one table, so every number the pages show agrees with the
raw rows. Kernel rows are split evenly over the runs so the total is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb

from benchmarks.scale import catalog as cat
from benchmarks.scale.catalog import FIRST, GAP_US, KERNEL_VERBS, LAST, LAYER

COMM = "('allreduce', 'all_to_all', 'allgather', 'reduce_scatter', 'other_comm')"


@dataclass(frozen=True)
class TraceRun:
    run_id: str
    verb: str
    idx: int
    ranks: int
    steps: int
    kernels_per_step: int
    variant: int
    scale: float  # this run's speed factor (0.8..1.2): every duration and offset

    @property
    def rows(self) -> int:
        return self.ranks * self.steps * self.kernels_per_step

    @property
    def layer_us(self) -> float:
        return cat.layer_us(self.variant) * self.scale

    @property
    def step_us(self) -> float:
        layers = math.ceil((self.kernels_per_step - 2) / len(LAYER))
        return (FIRST[2] + GAP_US + layers * cat.layer_us(self.variant) + LAST[2] + 2 * GAP_US) * (
            self.scale
        )


def trace_runs(con: duckdb.DuckDBPyConnection, kernel_rows: int, rank_steps: int) -> list[TraceRun]:
    """The trace-bearing runs of ``plan`` with their shapes; rows add up to ``kernel_rows``."""
    rows = con.execute(
        "SELECT run_id, verb, idx, trace_idx FROM plan WHERE list_contains(?::VARCHAR[], verb) "
        "ORDER BY idx",
        [list(KERNEL_VERBS)],
    ).fetchall()
    if not rows:
        return []
    # (run, kernel-in-step) pairs to hand out; rounds down to a multiple of rank_steps
    kernel_steps = kernel_rows // rank_steps
    base, extra = divmod(kernel_steps, len(rows))
    if base < len(LAYER) + 2:
        raise ValueError(f"{kernel_rows} kernel rows over {len(rows)} trace runs is under one "
                         "layer per step: give more rows or fewer runs")  # fmt: skip
    out = []
    for run_id, verb, idx, t in rows:
        ranks = 4 if t % 4 == 3 else 8
        ranks = min(ranks, rank_steps)
        out.append(TraceRun(run_id, verb, idx, ranks, rank_steps // ranks,
                            base + (1 if t < extra else 0), t % 5,
                            0.8 + 0.4 * ((t * 0.6180339887) % 1.0)))  # fmt: skip
    return out


def create_template(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE OR REPLACE TEMP TABLE tpl (variant INTEGER, slot INTEGER, name VARCHAR, "
        "category VARCHAR, dtype VARCHAR, kind VARCHAR, base_us DOUBLE, offset_us DOUBLE)"
    )
    con.executemany("INSERT INTO tpl VALUES (?, ?, ?, ?, ?, ?, ?, ?)", cat.template_rows())


def insert_run(con: duckdb.DuckDBPyConnection, run: TraceRun) -> None:
    """One run's events and aggregates (seven INSERTs from one TEMP table)."""
    n, first = run.kernels_per_step, (FIRST[2] + GAP_US) * run.scale
    con.execute(
        "CREATE OR REPLACE TEMP TABLE ev AS "
        # the first step's first event (an input copy) runs before the step: outside steps
        "SELECT r.rank::INTEGER AS rank, "
        "  CASE WHEN s.step = 0 AND p.pos = 0 THEN NULL ELSE s.step END::INTEGER AS step, "
        "  CASE WHEN t.category IN " + COMM + " AND ? = 1 THEN 39 ELSE 7 END::BIGINT AS stream, "
        "  r.rank * 0.37 + s.step * ? + CASE t.slot WHEN -1 THEN 0 "
        "    WHEN -2 THEN ? - (? + ?) * ? "
        "    ELSE ? + ((p.pos - 1) // ?) * ? + t.offset_us * ? END AS start_us, "
        "  t.base_us * ? * (0.9 + 0.1 * (hash(?, r.rank, s.step, p.pos) % 100000) / 100000.0) "
        "    AS dur_us, "
        "  t.name, t.category, t.dtype, t.kind "
        "FROM range(?) r(rank), range(?) s(step), range(?) p(pos) "
        "JOIN tpl t ON t.variant = ? AND t.slot = CASE WHEN p.pos = 0 THEN -1 "
        "  WHEN p.pos = ? - 1 THEN -2 ELSE (p.pos - 1) % ? END",
        [run.variant, run.step_us, run.step_us, LAST[2], GAP_US, run.scale, first, len(LAYER),
         run.layer_us, run.scale, run.scale, run.idx, run.ranks, run.steps, n, run.variant, n,
         len(LAYER)],
    )  # fmt: skip
    rid = [run.run_id]
    con.execute(
        "INSERT INTO trace_kernels (run_id, rank, step, stream, start_us, dur_us, name, "
        "category, dtype, kind) SELECT ?, rank, step, stream, start_us, dur_us, name, category, "
        "dtype, kind FROM ev ORDER BY rank, step, start_us",
        rid,
    )
    con.execute(
        "INSERT INTO trace_kernel_stats (run_id, rank, name, category, dtype, calls, total_us, "
        "min_us, max_us, steps_seen) SELECT ?, rank, name, category, dtype, count(*), "
        "sum(dur_us), min(dur_us), max(dur_us), count(DISTINCT step) FROM ev GROUP BY ALL",
        rid,
    )
    con.execute(
        "INSERT INTO trace_step_categories (run_id, rank, step, category, calls, total_us) "
        "SELECT ?, rank, step, category, count(*), sum(dur_us) FROM ev WHERE step IS NOT NULL "
        "GROUP BY ALL",
        rid,
    )
    con.execute(
        "INSERT INTO trace_outside_categories (run_id, rank, category, calls, total_us) "
        "SELECT ?, rank, category, count(*), sum(dur_us) FROM ev WHERE step IS NULL GROUP BY ALL",
        rid,
    )
    # step anatomy: per layer the first AllReduce is the attention output, the second MoE's
    con.execute(
        "INSERT INTO trace_comm_sources (run_id, rank, category, source, in_steps, calls, "
        "total_us) SELECT ?, rank, category, CASE WHEN category = 'allgather' THEN 'logits' "
        "  WHEN category <> 'allreduce' THEN 'moe' WHEN k % 2 = 0 THEN 'attention' "
        "  ELSE 'moe' END, step IS NOT NULL, count(*), sum(dur_us) "
        "FROM (SELECT *, row_number() OVER (PARTITION BY rank, step, category ORDER BY start_us) "
        "  AS k FROM ev WHERE category IN " + COMM + ") GROUP BY ALL",
        rid,
    )
    con.execute(
        "INSERT INTO trace_steps (run_id, rank, step, name, source, start_us, wall_us, busy_us, "
        "context_tokens, generation_tokens, context_requests, generation_requests) "
        "SELECT ?, rank, step, 'execute_context_0(0)_generation_' || ?::VARCHAR || '(' || "
        "?::VARCHAR || ')', 'vllm', rank * 0.37 + step * ?, ?, sum(dur_us), 0, ?, 0, ? "
        "FROM ev WHERE step IS NOT NULL GROUP BY rank, step",
        [run.run_id, *[run.idx % 64 + 1] * 2, run.step_us, run.step_us, *[run.idx % 64 + 1] * 2],
    )  # fmt: skip
    con.execute(
        "INSERT INTO trace_ranks (run_id, rank, file, size_bytes, partial, rank_source, "
        "world_size, backend, nccl_version, device_name, events_total, events_kept, kernels, "
        "has_gpu, busy_us, idle_us, span_us, comm_us, exposed_comm_us, steps, trace_start_ns, "
        "step_source) "
        "SELECT ?, rank, '/data/traces/dp0_pp0_tp' || rank || '_dcp0_ep0_rank' || rank || "
        "  '.1764460800000000000.pt.trace.json.gz', count(*) * 310, "
        "  p.status = 'partial' AND rank = 3, 'filename', ?, 'nccl', '2.27.7', "
        "  list_extract(?::VARCHAR[], p.hclass + 1), count(*) * 9, count(*) * 3, count(*), "
        "  true, sum(dur_us), ? - sum(dur_us), ?, sum(dur_us) FILTER (WHERE category IN "
        + COMM + "), sum(dur_us) FILTER (WHERE category IN " + COMM + "), ?, "
        "  epoch_ns(any_value(p.started_at)) + rank * 1000, 'vllm' "
        "FROM ev, plan p WHERE p.run_id = ? GROUP BY rank, p.status, p.hclass",
        [run.run_id, run.ranks, [hc.gpu_model for hc in cat.HOST_CLASSES],
         run.steps * run.step_us, run.steps * run.step_us, run.steps, run.run_id],
    )  # fmt: skip
