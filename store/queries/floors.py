"""Named queries for a trace run's floors (``python -m collectors floor``, the Kernel page).

The run's steps with their batch and context columns (trace_steps, migrations 0002 and 0014),
its categories per step (trace_step_categories) and what the run recorded about itself: host,
GPU names, world size, the profiled server's flags and model (vllm_server / sglang_server,
0005 and 0007), the config.json recorded with it (0008) and its ``model`` argument. A store
older than one of these tables gives empty frames (the floors then name the input as
missing), never an error. Every value is a bound parameter.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from store.location import StoreLocation
from store.reader import query_df


def _safe(loc: StoreLocation, sql: str, params: list) -> pd.DataFrame:
    try:
        return query_df(loc, sql, params)
    except duckdb.BinderException:  # a column of a migration this store lacks
        return pd.DataFrame()
    except duckdb.CatalogException:  # a table of a migration this store lacks
        return pd.DataFrame()


def steps(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Every (rank, step): its source, wall time, batch and context columns."""
    full = _safe(
        loc,
        "SELECT rank, step, source, wall_us, context_tokens, generation_tokens, "
        "context_requests, generation_requests, context_kv_tokens, generation_kv_tokens, "
        "context_attended FROM trace_steps WHERE run_id = ? ORDER BY rank, step",
        [run_id],
    )
    if not full.empty or query_df(loc, "SELECT 1 FROM trace_steps WHERE run_id = ? LIMIT 1",
                                  [run_id]).empty:  # fmt: skip
        return full
    return query_df(  # a store from before 0014: no context columns
        loc,
        "SELECT rank, step, source, wall_us, context_tokens, generation_tokens, "
        "context_requests, generation_requests FROM trace_steps WHERE run_id = ? "
        "ORDER BY rank, step",
        [run_id],
    )


def step_categories(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Calls and time per (rank, step, category)."""
    return query_df(
        loc,
        "SELECT rank, step, category, calls, total_us FROM trace_step_categories "
        "WHERE run_id = ? ORDER BY rank, step, category",
        [run_id],
    )


def run_facts(loc: StoreLocation, run_id: str) -> dict:
    """What the run recorded about itself ({} when it is no trace run in this store)."""
    head = query_df(
        loc,
        "SELECT r.run_id, r.host, r.verb, CASE WHEN json_valid(r.args) THEN "
        "json_extract(r.args, '$.model') END AS args_model, CASE WHEN json_valid(r.args) THEN "
        "json_extract(r.args, '$.batch') END AS args_batch, CASE WHEN json_valid(r.args) THEN "
        "json_extract(r.args, '$.context') END AS args_context, t.world_size, t.ranks, "
        "t.devices, t.has_gpu "
        "FROM v_runs r JOIN (SELECT run_id, max(world_size) AS world_size, count(*) AS ranks, "
        "string_agg(DISTINCT device_name, '\n') AS devices, bool_or(has_gpu) AS has_gpu "
        "FROM trace_ranks "
        "WHERE run_id = ? GROUP BY run_id) t USING (run_id)",
        [run_id],
    )
    if head.empty:
        return {}
    out = head.iloc[0].to_dict()
    for table in ("v_vllm_servers", "v_sglang_servers"):
        server = _safe(loc, "SELECT model_id, tp, dp, ep, "
                       + ("all2all_backend, kv_cache_dtype" if table == "v_vllm_servers"
                          else "NULL AS all2all_backend, NULL AS kv_cache_dtype")
                       + f" FROM {table} WHERE run_id = ?", [run_id])  # fmt: skip
        if not server.empty:
            out.update(server.iloc[0].to_dict(), engine=table.split("_")[1])
            break
    cfg = _safe(loc, "SELECT model_id AS config_model_id, source_path, config_json, "
                "quant_config_json FROM serving_model_config WHERE run_id = ? LIMIT 1",
                [run_id])  # fmt: skip
    if not cfg.empty:
        out.update(cfg.iloc[0].to_dict())
    return out
