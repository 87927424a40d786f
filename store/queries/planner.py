"""Named queries for the Tradeoff calculator and ``python -m planner --host``.

Measured communication curves (``v_comm_results``, migration 0003), GPU inventories
(``v_gpu_host`` / ``v_gpu_devices``, 0004), measured step breakdowns for calibration (the
``v_trace_*`` views of 0002) and model names recorded in run arguments. Every value is a bound
parameter. A store whose schema predates one of these tables gives an empty frame (the
page then falls back to presets and says so), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from store.location import StoreLocation
from store.queries.trace import comm_sources_per_step
from store.reader import query_df


def _safe(loc: StoreLocation, sql: str, params: list) -> pd.DataFrame:
    try:
        return query_df(loc, sql, params)
    except duckdb.CatalogException:  # table/view of a migration this store lacks
        return pd.DataFrame()


def gpu_hosts(loc: StoreLocation) -> pd.DataFrame:
    """Per host: its newest ``gpu`` run with GPUs recorded (run id, count, model, link)."""
    return _safe(
        loc,
        "SELECT host, arg_max(run_id, finished_at) AS run_id, "
        "arg_max(gpu_count, finished_at) AS gpu_count, arg_max(gpu_model, finished_at) AS "
        "gpu_model, arg_max(interconnect_class, finished_at) AS interconnect_class, "
        "max(finished_at) AS finished_at FROM v_gpu_host WHERE status IN ('ok', 'partial') "
        "AND gpu_count > 0 GROUP BY host ORDER BY host",
        [],
    )


def gpu_run(loc: StoreLocation, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the v_gpu_host row, its v_gpu_devices rows) of one gpu run."""
    host = _safe(loc, "SELECT * FROM v_gpu_host WHERE run_id = ?", [run_id])
    devices = _safe(
        loc,
        "SELECT gpu_index, name, memory_bytes, mem_bandwidth_gbps, nvlink_active "
        "FROM v_gpu_devices WHERE run_id = ? ORDER BY gpu_index",
        [run_id],
    )
    return host, devices


def latest_gpu_run_id(loc: StoreLocation, host: str) -> str | None:
    frame = _safe(
        loc,
        "SELECT run_id FROM v_gpu_host WHERE host = ? AND status IN ('ok', 'partial') "
        "ORDER BY finished_at DESC, run_id DESC LIMIT 1",
        [host],
    )
    return None if frame.empty else str(frame["run_id"].iloc[0])


def comm_runs(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """Comm / nccl-tests runs (optionally on one host), newest first, with what they hold."""
    return _safe(
        loc,
        "SELECT run_id, host, any_value(label) AS label, max(finished_at) AS finished_at, "
        "any_value(source) AS source, any_value(backend) AS backend, "
        "any_value(world_size) AS world_size, any_value(device) AS device, "
        "string_agg(DISTINCT op, ', ' ORDER BY op) AS ops, count(*) AS points "
        "FROM v_comm_results WHERE (?::VARCHAR IS NULL OR host = ?) "
        "GROUP BY run_id, host ORDER BY finished_at DESC, run_id DESC",
        [host, host],
    )


def comm_rows(loc: StoreLocation, run_ids: list[str]) -> pd.DataFrame:
    """Every measured point of the given comm runs (what planner.cost.comm turns into curves)."""
    if not run_ids:
        return pd.DataFrame()
    return _safe(
        loc,
        "SELECT run_id, host, op, dtype, tokens_per_rank, hidden, bytes, p50_us, busbw_gbps, "
        "source, backend, world_size, device, interconnect, gpu_names FROM v_comm_results "
        "WHERE list_contains(string_split(?, ','), run_id) ORDER BY run_id, op, bytes",
        [",".join(run_ids)],  # one string: the reader's cache key must be hashable
    )


def trace_breakdowns(loc: StoreLocation) -> pd.DataFrame:
    """Per trace run: mean step wall time, AllReduce and all-to-all-like time per step, the
    world size and the typical decode batch (generation tokens), for calibration."""
    return _safe(
        loc,
        "WITH s AS (SELECT run_id, avg(wall_us) AS wall_us, "
        "median(generation_tokens) AS gen_tokens FROM v_trace_steps GROUP BY run_id), "
        "c AS (SELECT run_id, "
        "sum(us_per_step) FILTER (WHERE category = 'allreduce') AS ar_us, "
        "sum(us_per_step) FILTER (WHERE category IN ('all_to_all', 'allgather', "
        "'reduce_scatter')) AS a2a_us FROM v_trace_categories GROUP BY run_id), "
        "w AS (SELECT run_id, max(world_size) AS world_size FROM v_trace_ranks GROUP BY run_id) "
        "SELECT r.run_id, r.host, r.label, r.finished_at, w.world_size, s.gen_tokens, "
        "s.wall_us / 1000.0 AS step_ms, coalesce(c.ar_us, 0) / 1000.0 AS allreduce_ms, "
        "coalesce(c.a2a_us, 0) / 1000.0 AS all_to_all_ms "
        "FROM v_runs r JOIN s USING (run_id) LEFT JOIN c USING (run_id) "
        "LEFT JOIN w USING (run_id) WHERE s.wall_us > 0 ORDER BY r.finished_at DESC, r.run_id DESC",
        [],
    )


@dataclass(frozen=True)
class AllReduceAnatomy:
    """A trace run's AllReduces per step, split by the module that issued them."""

    calls_per_step: float
    moe_calls_per_step: float
    moe_ms_per_step: float
    moe_pct_of_step: float


def trace_allreduce_anatomy(loc: StoreLocation, run_id: str) -> AllReduceAnatomy | None:
    """From the run's step anatomy (migration 0006); None when it has none (older imports,
    or no AllReduce at all)."""
    try:
        df = comm_sources_per_step(loc, run_id)
    except duckdb.CatalogException:
        return None
    ar = df[df["category"] == "allreduce"] if not df.empty else df
    if ar.empty or not ar["calls_per_step"].sum() > 0:
        return None
    moe = ar[ar["source"] == "moe"]
    return AllReduceAnatomy(float(ar["calls_per_step"].sum()), float(moe["calls_per_step"].sum()),
                            float(moe["us_per_step"].sum()) / 1e3,
                            float(moe["pct_of_step"].sum()))  # fmt: skip


@dataclass(frozen=True)
class CollectiveTransfer:
    """A trace run's AllReduce calls matched across ranks: each call's duration on the rank
    that waited least (the transfer) and averaged over ranks (what one rank's trace shows)."""

    ranks: int
    steps: int
    calls_per_step: float
    transfer_us: float  # per call: the minimum over ranks, averaged over calls
    traced_us: float  # per call: the mean over ranks


def trace_allreduce_transfer(loc: StoreLocation, run_id: str) -> CollectiveTransfer | None:
    """The k-th AllReduce of step s on every rank is one call; a rank that launched it early
    spends the wait for the slowest rank inside the kernel, so the call's transfer is its
    shortest duration over ranks. Calls not seen on every rank are left out. None for a
    one-rank run or one without AllReduce kernels (``trace_kernels``, migration 0002)."""
    frame = _safe(
        loc,
        "WITH k AS (SELECT rank, step, dur_us, row_number() OVER (PARTITION BY rank, step "
        "ORDER BY start_us, stream) AS i FROM trace_kernels WHERE run_id = ? "
        "AND step IS NOT NULL AND category = 'allreduce' AND kind = 'kernel'), "
        "r AS (SELECT count(DISTINCT rank) AS ranks FROM k), "
        "c AS (SELECT step, i, min(dur_us) AS transfer_us, avg(dur_us) AS traced_us, "
        "count(*) AS n FROM k GROUP BY step, i) "
        "SELECT any_value(r.ranks) AS ranks, count(DISTINCT c.step) AS steps, count(*) AS calls, "
        "avg(c.transfer_us) AS transfer_us, avg(c.traced_us) AS traced_us "
        "FROM c CROSS JOIN r WHERE c.n = r.ranks",
        [run_id],
    )
    if frame.empty or not frame["calls"].iloc[0] or (frame["ranks"].iloc[0] or 0) < 2:
        return None
    row = frame.iloc[0]
    return CollectiveTransfer(int(row["ranks"]), int(row["steps"]),
                              float(row["calls"]) / max(int(row["steps"]), 1),
                              float(row["transfer_us"]), float(row["traced_us"]))  # fmt: skip


def trace_host(loc: StoreLocation, run_id: str) -> str | None:
    frame = _safe(loc, "SELECT host FROM v_runs WHERE run_id = ?", [run_id])
    return None if frame.empty else str(frame["host"].iloc[0])


def profiled_servers(loc: StoreLocation, host: str) -> pd.DataFrame:
    """The host's vllm-profile and sglang-profile runs whose traces were imported: the server's
    model and layout and the load it ran under (what a trace calibrates), newest first."""
    cols = ("run_id, host, finished_at, model_id, tp, dp, ep, concurrency, input_len, "
            "output_len")  # fmt: skip
    frames = [
        _safe(loc, f"SELECT {cols}, '{engine}' AS engine FROM {view} WHERE host = ? "
              "AND run_id IN (SELECT run_id FROM trace_ranks)", [host])  # fmt: skip
        for engine, view in (("vllm", "v_vllm_servers"), ("sglang", "v_sglang_servers"))
    ]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True).sort_values(
        ["finished_at", "run_id"], ascending=False, ignore_index=True)


def run_models(loc: StoreLocation) -> pd.DataFrame:
    """Runs whose arguments record a model (a name, or the `profile` collector's shape as a
    JSON object), newest first."""
    return _safe(
        loc,
        "SELECT run_id, verb, host, finished_at, model FROM ("
        "SELECT run_id, verb, host, finished_at, json_extract(args, '$.model')::VARCHAR AS model "
        "FROM v_runs WHERE args IS NOT NULL AND json_valid(args)) "
        "WHERE model IS NOT NULL AND model NOT IN ('null', '\"\"') "
        "ORDER BY finished_at DESC, run_id DESC",
        [],
    )


def model_configs(loc: StoreLocation, model_id: str | None = None,
                  host: str | None = None) -> pd.DataFrame:  # fmt: skip
    """Recorded config.json files of served models (migration 0008), newest first per model
    and host: what ``planner.specs.models.from_config`` needs to predict for a stored run."""
    return _safe(
        loc,
        "SELECT model_id, host, arg_max(run_id, finished_at) AS run_id, "
        "arg_max(source_path, finished_at) AS source_path, "
        "arg_max(config_json, finished_at) AS config_json, "
        "arg_max(quant_config_json, finished_at) AS quant_config_json, "
        "max(finished_at) AS finished_at FROM v_serving_model_config "
        "WHERE (?::VARCHAR IS NULL OR model_id = ?) AND (?::VARCHAR IS NULL OR host = ?) "
        "GROUP BY model_id, host ORDER BY finished_at DESC",
        [model_id, model_id, host, host],
    )
