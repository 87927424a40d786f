"""Named queries for the Expert load page and the planner's ``--expert-load`` (migration 0013).

Bound parameters only. "The same model" compares model ids by their last path part, case
folded: ``deepseek-ai/DeepSeek-V3``, ``/models/DeepSeek-V3`` and the preset ``deepseek-v3``
are one model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from store.location import StoreLocation
from store.reader import query_df

# A model id's last path part, case folded (SQL over a column or a bound parameter).
_KEY = "lower(regexp_replace({}, '^.*/', ''))"


def runs(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """Every expert-load run (optionally of one host), newest first."""
    return query_df(
        loc,
        "SELECT run_id, host, label, finished_at, model_id, model_name, recorder_mode, files, "
        "num_layers, num_experts, top_k, dense_layers, routed_layers, layer_total_spread, "
        "forward_passes, recorded_ep, url, sglang_version FROM v_expert_load "
        "WHERE (?::VARCHAR IS NULL OR host = ?) ORDER BY finished_at DESC, run_id DESC",
        [host, host],
    )


def run(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """The one v_expert_load row of a run (empty when it is not an expert-load run)."""
    return query_df(loc, "SELECT * FROM v_expert_load WHERE run_id = ?", [run_id])


def counts(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Every layer x expert: tokens and the share of its layer's tokens."""
    return query_df(loc, "SELECT layer, expert, count, share FROM v_expert_load_counts "
                    "WHERE run_id = ? ORDER BY layer, expert", [run_id])  # fmt: skip


def count_matrix(loc: StoreLocation, run_id: str) -> np.ndarray | None:
    """The counts as a layers x experts array (None when the run has none)."""
    df = counts(loc, run_id)
    if df.empty:
        return None
    grid = np.zeros((int(df["layer"].max()) + 1, int(df["expert"].max()) + 1))
    grid[df["layer"].to_numpy(), df["expert"].to_numpy()] = df["count"].to_numpy()
    return grid


def layers(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Per layer: total, hottest expert, its tokens over the mean expert's (NULL: dense)."""
    return query_df(loc, "SELECT layer, total, max_count, mean_count, hottest_expert, "
                    "max_over_mean FROM v_expert_load_layers WHERE run_id = ? ORDER BY layer",
                    [run_id])  # fmt: skip


def ep_summary(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Per EP size x placement: the worst layer's busiest rank over the mean rank, and the mean
    of that over routed layers."""
    return query_df(loc, "SELECT ep_size, placement, worst_max_over_mean, worst_layer, "
                    "mean_max_over_mean, worst_busiest_share FROM v_expert_load_ep "
                    "WHERE run_id = ? ORDER BY ep_size, placement", [run_id])  # fmt: skip


def ranks(loc: StoreLocation, run_id: str, ep_size: int) -> pd.DataFrame:
    """Per placement x routed layer at one EP size: the busiest rank and its tokens."""
    return query_df(loc, "SELECT placement, layer, busiest_rank, max_tokens, mean_tokens, "
                    "max_over_mean, busiest_share FROM v_expert_load_ranks WHERE run_id = ? "
                    "AND ep_size = ? ORDER BY placement, layer", [run_id, ep_size])  # fmt: skip


def model_traces(loc: StoreLocation, model_id: str) -> pd.DataFrame:
    """Trace runs whose server served this model (``vllm-profile`` / ``sglang-profile``) and
    that stored steps, newest first: run_id, verb, host, label, finished_at, model_id. Their
    figures: :func:`trace_figures`, one run at a time (summing every such run's categories
    read all of ``trace_step_categories``: 7.7M rows, 0.3 CPU s at 10,000 runs)."""
    key = _KEY.format("model_id")
    return query_df(
        loc,
        "WITH m AS (SELECT run_id, model_id FROM (SELECT run_id, model_id FROM v_vllm_servers "
        f"UNION ALL SELECT run_id, model_id FROM v_sglang_servers) WHERE {key} = "
        f"{_KEY.format('?')}) "
        "SELECT r.run_id, r.verb, r.host, r.label, r.finished_at, m.model_id "
        "FROM m JOIN v_runs r USING (run_id) "
        "WHERE run_id IN (SELECT run_id FROM trace_steps WHERE run_id IN (SELECT run_id FROM m)) "
        "ORDER BY r.finished_at DESC, r.run_id DESC",
        [model_id],
    )


def trace_figures(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """One row for a trace run with steps (none without): per step, the mean step wall
    (step_ms) and the MoE kernels', all-to-all's (NCCL all-to-all, or the AllGather +
    ReduceScatter of vLLM's default backend) and AllReduce's milliseconds; a category's time
    per step is its time over the run's rank x step count, as ``v_trace_categories`` counts
    it."""
    return query_df(
        loc,
        "SELECT s.wall_us / 1000.0 AS step_ms, coalesce(c.moe_us, 0) / s.rank_steps / 1000.0 "
        "AS moe_ms, coalesce(c.a2a_us, 0) / s.rank_steps / 1000.0 AS all_to_all_ms, "
        "coalesce(c.ar_us, 0) / s.rank_steps / 1000.0 AS allreduce_ms "
        "FROM (SELECT avg(wall_us) AS wall_us, count(*) AS rank_steps FROM trace_steps "
        "WHERE run_id = ?) s, "
        "(SELECT sum(total_us) FILTER (WHERE category = 'moe') AS moe_us, "
        "sum(total_us) FILTER (WHERE category IN ('all_to_all', 'allgather', "
        "'reduce_scatter')) AS a2a_us, "
        "sum(total_us) FILTER (WHERE category = 'allreduce') AS ar_us "
        "FROM trace_step_categories WHERE run_id = ?) c WHERE s.rank_steps > 0",
        [run_id, run_id],
    )


def eplb_balancedness(loc: StoreLocation) -> pd.DataFrame:
    """vLLM's EPLB gauges from ``vllm-metrics`` scrapes, newest first: per-layer balancedness
    (mean rank's tokens over the busiest rank's) at the server's EP size, min / p50 / p90 /
    mean over MoE layers (vllm/distributed/eplb/metrics.py, ``vllm:eplb_balancedness_*``)."""
    return query_df(
        loc,
        "SELECT run_id, host, url, model_name, scraped_at, "
        "min(value) FILTER (WHERE metric = 'vllm:eplb_balancedness_min') AS worst_layer, "
        "avg(value) FILTER (WHERE metric = 'vllm:eplb_balancedness_p50') AS median_layer, "
        "avg(value) FILTER (WHERE metric = 'vllm:eplb_balancedness_p90') AS p90_layer, "
        "avg(value) FILTER (WHERE metric = 'vllm:eplb_balancedness_avg') AS mean_layer "
        "FROM v_serving_metrics WHERE engine = 'vllm' AND metric LIKE 'vllm:eplb_balancedness_%' "
        "GROUP BY run_id, host, url, model_name, scraped_at "
        "ORDER BY scraped_at DESC, run_id DESC LIMIT 200",
    )
