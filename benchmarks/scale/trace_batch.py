"""The trace tables for many runs per statement: what makes 10^9 kernel rows buildable.

Same rows as benchmarks/scale/trace.py (its per-run ``insert_run`` stays the reference: a
test builds both and compares), generated for a batch of runs at a time:

- ``trace_kernels`` comes straight from ONE ``range()`` over the batch's rows, decoded by
  integer arithmetic into run, rank, step and position, so the rows are written in (run,
  rank, step, launch) order without a sort (a lateral ``range()`` per run does not keep
  order) and every run's rows stay together as a commit writes them. Kernel name, category
  and timing come from the template by list index: no join, no string per row before the
  Parquet writer.
- The aggregates come from a small TEMP table ``tb_agg`` (run x rank x step x template slot,
  ~1/30 of the rows), grouped from the same generator: what the per-run path computes from
  every event, including which AllReduce of a step is the attention's (its index among the
  step's AllReduces, known from the slot and the layer).

Every run of a batch has the same rows (ranks x steps x kernels per step): ``batches``
splits the plan where the kernels per step change.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb

from benchmarks.scale import catalog as cat
from benchmarks.scale.catalog import GAP_US, LAST, LAYER
from benchmarks.scale.trace import COMM, TraceRun

SLOTS = len(LAYER) + 2  # per variant: first event, last event, the layer's kernels
COMM_CATS = COMM.strip("()").replace("'", "").split(", ")


def batches(plan: list[TraceRun], max_rows: int) -> Iterator[list[TraceRun]]:
    """Consecutive runs of equal size, at most ``max_rows`` rows (one run at least)."""
    batch: list[TraceRun] = []
    for run in plan:
        if batch and (run.rows != batch[0].rows or (len(batch) + 1) * run.rows > max_rows):
            yield batch
            batch = []
        batch.append(run)
    if batch:
        yield batch


def _template() -> dict[str, list]:
    """Template columns as lists indexed by variant * SLOTS + (0 first, 1 last, 2 + slot)."""
    rows = {(r[0], r[1]): r for r in cat.template_rows()}
    cols: dict[str, list] = {k: [] for k in ("name", "category", "dtype", "kind", "base_us",
                                             "offset_us", "ar_j", "ar_n")}  # fmt: skip
    for variant in sorted(cat.VARIANTS):
        ar_slots = [s for s in range(len(LAYER)) if rows[variant, s][3] == "allreduce"]
        for slot in (-1, -2, *range(len(LAYER))):
            _v, _s, name, category, dtype, kind, base, offset = rows[variant, slot]
            for key, value in zip(("name", "category", "dtype", "kind", "base_us", "offset_us"),
                                  (name, category, dtype, kind, base, offset), strict=True):  # fmt: skip
                cols[key].append(value)
            cols["ar_j"].append(ar_slots.index(slot) if slot in ar_slots else -1)
            cols["ar_n"].append(len(ar_slots))
    return cols


TEMPLATE = _template()


def _generator(batch: list[TraceRun]) -> tuple[str, dict]:
    """SELECT of the batch's events: k (run in batch), rank, s (step), pos, t, start_us,
    dur_us, par (parity of the event's index among its step's AllReduces)."""
    n, per_run = batch[0].kernels_per_step, batch[0].rows
    per = {
        "idx": [r.idx for r in batch], "steps": [r.steps for r in batch],
        "variant": [r.variant for r in batch], "scale": [r.scale for r in batch],
        "step_us": [r.step_us for r in batch], "layer_us": [r.layer_us for r in batch],
        "first": [(cat.FIRST[2] + GAP_US) * r.scale for r in batch],
    }  # fmt: skip
    params = {**per, "base_us": TEMPLATE["base_us"], "offset_us": TEMPLATE["offset_us"],
              "ar_j": TEMPLATE["ar_j"], "ar_n": TEMPLATE["ar_n"]}  # fmt: skip
    # The same expressions as trace.insert_run, with its parameters looked up per run (the
    # same types, so hash() and the floating point give the same values).
    sql = (
        "SELECT k, rank, s, pos, t, "
        "  rank * 0.37 + s * step_us + CASE t0 WHEN 0 THEN 0 "
        f"    WHEN 1 THEN step_us - ({LAST[2]!r}::DOUBLE + {GAP_US!r}::DOUBLE) * scale "
        f"    ELSE first + ((pos - 1) // {len(LAYER)}) * layer_us "
        "      + list_extract($offset_us::DOUBLE[], t + 1) * scale END AS start_us, "
        "  list_extract($base_us::DOUBLE[], t + 1) * scale * "
        "    (0.9 + 0.1 * (hash(idx, rank, s, pos) % 100000) / 100000.0) AS dur_us, "
        "  CASE WHEN list_extract($ar_j::INTEGER[], t + 1) < 0 THEN 0 "
        f"    ELSE (((pos - 1) // {len(LAYER)}) * list_extract($ar_n::INTEGER[], t + 1) "
        "      + list_extract($ar_j::INTEGER[], t + 1) + 1) % 2 END AS par "
        "FROM (SELECT *, variant * " + str(SLOTS) + " + t0 AS t FROM ("
        f"  SELECT *, CASE WHEN pos = 0 THEN 0 WHEN pos = {n} - 1 THEN 1 "
        f"    ELSE 2 + (pos - 1) % {len(LAYER)} END AS t0 FROM ("
        f"    SELECT k, j // (steps * {n}) AS rank, (j // {n}) % steps AS s, j % {n} AS pos, "
        "      idx, variant, scale, step_us, layer_us, first FROM ("
        f"      SELECT k, j, list_extract($idx::INTEGER[], k + 1) AS idx, "
        "        list_extract($steps::BIGINT[], k + 1) AS steps, "
        "        list_extract($variant::INTEGER[], k + 1) AS variant, "
        "        list_extract($scale::DOUBLE[], k + 1) AS scale, "
        "        list_extract($step_us::DOUBLE[], k + 1) AS step_us, "
        "        list_extract($layer_us::DOUBLE[], k + 1) AS layer_us, "
        "        list_extract($first::DOUBLE[], k + 1) AS first FROM ("
        f"        SELECT (i // {per_run})::INTEGER AS k, i % {per_run} AS j "
        f"        FROM range({len(batch) * per_run}) r(i))))))"
    )
    return sql, params


def insert_batch(con: duckdb.DuckDBPyConnection, batch: list[TraceRun]) -> None:
    """The batch's ``trace_kernels`` rows and its aggregate tables (caller's transaction)."""
    assert len({r.rows for r in batch}) == 1 and len({r.kernels_per_step for r in batch}) == 1
    gen, params = _generator(batch)
    ids = [r.run_id for r in batch]
    step = "CASE WHEN s = 0 AND pos = 0 THEN NULL ELSE s END::INTEGER"
    con.execute(
        "INSERT INTO trace_kernels (run_id, rank, step, stream, start_us, dur_us, name, "
        "category, dtype, kind) SELECT list_extract($ids::VARCHAR[], k + 1), rank, "
        f"{step}, CASE WHEN list_contains($comm::VARCHAR[], "
        "  list_extract($category::VARCHAR[], t + 1)) AND list_extract($variant::INTEGER[], k + 1)"
        "  = 1 THEN 39 ELSE 7 END::BIGINT, start_us, dur_us, "
        "list_extract($name::VARCHAR[], t + 1), list_extract($category::VARCHAR[], t + 1), "
        "list_extract($dtype::VARCHAR[], t + 1), list_extract($kind::VARCHAR[], t + 1) "
        f"FROM ({gen})",
        {**params, "ids": ids, "comm": COMM_CATS, "name": TEMPLATE["name"],
         "category": TEMPLATE["category"], "dtype": TEMPLATE["dtype"], "kind": TEMPLATE["kind"]},
    )  # fmt: skip
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE tb_agg AS SELECT k, rank::INTEGER AS rank, {step} AS step, "
        "t, par, count(*) AS calls, sum(dur_us) AS total_us, min(dur_us) AS min_us, "
        f"max(dur_us) AS max_us FROM ({gen}) GROUP BY ALL",
        params,
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE tb_run AS SELECT unnest($ids::VARCHAR[]) AS run_id, "
        "unnest(range(len($ids::VARCHAR[]))) AS k, unnest($idx::INTEGER[]) AS idx, "
        "unnest($ranks::INTEGER[]) AS ranks, unnest($steps::INTEGER[]) AS steps, "
        "unnest($step_us::DOUBLE[]) AS step_us",
        {"ids": ids, "idx": params["idx"], "ranks": [r.ranks for r in batch],
         "steps": params["steps"], "step_us": params["step_us"]},
    )  # fmt: skip
    con.execute(
        "CREATE OR REPLACE TEMP TABLE tb_a AS SELECT b.run_id, b.idx, b.ranks, b.steps, b.step_us, "
        "agg.rank, agg.step, agg.par, agg.calls, agg.total_us, agg.min_us, agg.max_us, "
        "list_extract($name::VARCHAR[], agg.t + 1) AS name, "
        "list_extract($category::VARCHAR[], agg.t + 1) AS category, "
        "list_extract($dtype::VARCHAR[], agg.t + 1) AS dtype "
        "FROM tb_agg agg JOIN tb_run b USING (k)",
        {"name": TEMPLATE["name"], "category": TEMPLATE["category"], "dtype": TEMPLATE["dtype"]},
    )  # fmt: skip
    _aggregates(con)


def _aggregates(con: duckdb.DuckDBPyConnection) -> None:
    """trace_kernel_stats, step/outside categories, comm sources, steps and ranks from ``tb_a``."""
    con.execute(
        "INSERT INTO trace_kernel_stats (run_id, rank, name, category, dtype, calls, total_us, "
        "min_us, max_us, steps_seen) SELECT run_id, rank, name, category, dtype, sum(calls), "
        "sum(total_us), min(min_us), max(max_us), count(DISTINCT step) FROM tb_a a "
        "GROUP BY run_id, rank, name, category, dtype"
    )
    con.execute(
        "INSERT INTO trace_step_categories (run_id, rank, step, category, calls, total_us) "
        "SELECT run_id, rank, step, category, sum(calls), sum(total_us) FROM tb_a a "
        "WHERE step IS NOT NULL GROUP BY ALL"
    )
    con.execute(
        "INSERT INTO trace_outside_categories (run_id, rank, category, calls, total_us) "
        "SELECT run_id, rank, category, sum(calls), sum(total_us) FROM tb_a a WHERE step IS NULL "
        "GROUP BY ALL"
    )
    con.execute(
        "INSERT INTO trace_comm_sources (run_id, rank, category, source, in_steps, calls, "
        "total_us) SELECT run_id, rank, category, CASE WHEN category = 'allgather' THEN 'logits' "
        "  WHEN category <> 'allreduce' THEN 'moe' WHEN par = 0 THEN 'attention' "
        "  ELSE 'moe' END, step IS NOT NULL, sum(calls), sum(total_us) "
        "FROM tb_a a WHERE category IN " + COMM + " GROUP BY ALL"
    )
    con.execute(
        "INSERT INTO trace_steps (run_id, rank, step, name, source, start_us, wall_us, busy_us, "
        "context_tokens, generation_tokens, context_requests, generation_requests) "
        "SELECT run_id, rank, step, 'execute_context_0(0)_generation_' || (idx % 64 + 1)::VARCHAR"
        " || '(' || (idx % 64 + 1)::VARCHAR || ')', 'vllm', rank * 0.37 + step * step_us, "
        "step_us, sum(total_us), 0, idx % 64 + 1, 0, idx % 64 + 1 "
        "FROM tb_a a WHERE step IS NOT NULL GROUP BY run_id, rank, step, idx, step_us"
    )
    con.execute(
        "INSERT INTO trace_ranks (run_id, rank, file, size_bytes, partial, rank_source, "
        "world_size, backend, nccl_version, device_name, events_total, events_kept, kernels, "
        "has_gpu, busy_us, idle_us, span_us, comm_us, exposed_comm_us, steps, trace_start_ns, "
        "step_source) "
        "SELECT a.run_id, rank, '/data/traces/dp0_pp0_tp' || rank || '_dcp0_ep0_rank' || rank "
        "  || '.1764460800000000000.pt.trace.json.gz', sum(calls) * 310, "
        "  p.status = 'partial' AND rank = 3, 'filename', a.ranks, 'nccl', '2.27.7', "
        "  list_extract($models::VARCHAR[], p.hclass + 1), sum(calls) * 9, sum(calls) * 3, "
        "  sum(calls), true, sum(total_us), a.steps * a.step_us - sum(total_us), "
        "  a.steps * a.step_us, sum(total_us) FILTER (WHERE category IN " + COMM + "), "
        "  sum(total_us) FILTER (WHERE category IN " + COMM + "), a.steps, "
        "  epoch_ns(any_value(p.started_at)) + rank * 1000, 'vllm' "
        "FROM tb_a a JOIN plan p USING (run_id) "
        "GROUP BY a.run_id, rank, p.status, p.hclass, a.ranks, a.steps, a.step_us "
        "ORDER BY a.run_id, rank",
        {"models": [hc.gpu_model for hc in cat.HOST_CLASSES]},
    )  # fmt: skip
