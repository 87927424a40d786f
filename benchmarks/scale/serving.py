"""Serving tables of the scale store: vllm-bench sweeps, vllm-profile and sglang-profile
servers and loads, the served models' recorded config.json, and one ``/metrics`` scrape per
vllm-metrics run (gauges, counters, 11 histograms)."""

from __future__ import annotations

from pathlib import Path

import duckdb

OK = "p.status <> 'failed'"
MODELS = "['moonshotai/Kimi-K2.5', 'deepseek-ai/DeepSeek-V3', 'MiniMaxAI/MiniMax-M2.5']"
# (layout, layout_kind, tp, dp, ep)
LAYOUTS = "[('TP8', 'tp', 8, 1, false), ('TP8+EP', 'tp_ep_dp1', 8, 1, true), " \
          "('TP1xDP8+EP', 'dp_attn_ep', 1, 8, true), ('TP4xDP2', 'tp_dp', 4, 2, false)]"  # fmt: skip
HISTOGRAMS = (  # vLLM histogram families and a typical mean (seconds or tokens)
    ("vllm:inter_token_latency_seconds", 0.012), ("vllm:time_to_first_token_seconds", 0.35),
    ("vllm:request_time_per_output_token_seconds", 0.012),
    ("vllm:e2e_request_latency_seconds", 6.5), ("vllm:request_queue_time_seconds", 0.05),
    ("vllm:request_inference_time_seconds", 6.2), ("vllm:request_prefill_time_seconds", 0.3),
    ("vllm:request_decode_time_seconds", 5.9), ("vllm:request_prompt_tokens", 1000.0),
    ("vllm:request_generation_tokens", 500.0), ("vllm:iteration_tokens_total", 32.0),
)  # fmt: skip
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 1000.0, 10000.0)  # fmt: skip


def insert_bench(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO serving_bench (run_id, source, result_date, bench_label, backend, model_id, "
        "tokenizer_id, num_prompts, request_rate, burstiness, max_concurrency, concurrency, "
        "input_len, output_len, completed, failed, duration_s, total_input_tokens, "
        "total_output_tokens, request_throughput, output_throughput, total_token_throughput, "
        "max_output_tokens_per_s, max_concurrent_requests, mean_ttft_ms, median_ttft_ms, "
        "std_ttft_ms, p90_ttft_ms, p99_ttft_ms, mean_tpot_ms, median_tpot_ms, std_tpot_ms, "
        "p90_tpot_ms, p99_tpot_ms, mean_itl_ms, median_itl_ms, std_itl_ms, p90_itl_ms, "
        "p99_itl_ms, mean_e2el_ms, median_e2el_ms, std_e2el_ms, p90_e2el_ms, p99_e2el_ms, tp, pp, "
        "dp, ep, layout, layout_kind, layout_source, vllm_version, extra) "
        "SELECT run_id, 'sweep', strftime(started_at, '%Y%m%d-%H%M%S'), NULL, 'vllm', model, "
        "model, c * 10, NULL, 1.0, c, c, 1000, 500, c * 10, 0, c * 5000 / thr, c * 10000, "
        "c * 5000, thr / 500, thr, thr * 3, thr * 1.3, c, "
        "ttft, ttft * 0.95, ttft * 0.2, ttft * 1.4, ttft * 2.1, tpot, tpot * 0.98, tpot * 0.1, "
        "tpot * 1.2, tpot * 1.6, tpot, tpot * 0.97, tpot * 0.3, tpot * 1.3, tpot * 2.5, "
        "ttft + 500 * tpot, ttft + 490 * tpot, 300, ttft + 600 * tpot, ttft + 700 * tpot, "
        "tp, 1, dp, ep, layout, kind, 'server-args', '0.11.2', '{\"seed\": 0}' FROM ("
        "SELECT *, c * 1000.0 / tpot * 0.9 AS thr FROM ("
        f"SELECT p.run_id, p.started_at, list_extract({MODELS}, p.idx % 3 + 1) AS model, "
        "l[1] AS layout, l[2] AS kind, l[3] AS tp, l[4] AS dp, l[5] AS ep, c.c, "
        "(8.0 + 0.04 * c.c * (1 + p.idx % 4) + (p.h % 100) / 100.0) AS tpot, "
        "(120.0 + 3.0 * c.c) AS ttft "
        f"FROM (SELECT *, list_extract({LAYOUTS}, idx % 4 + 1) AS l FROM plan) p, "
        "(SELECT unnest([1, 2, 4, 8, 16, 32, 64, 128, 256]) AS c) c "
        f"WHERE p.verb = 'vllm-bench' AND {OK}))"
    )  # fmt: skip


def insert_profile_servers(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO vllm_server SELECT p.run_id, 'http://127.0.0.1:8000', "
        f"list_extract({MODELS}, p.idx % 3 + 1), '/models/' || p.idx % 3, 32768, '0.11.2', "
        "l[3], 1, l[4], l[5], l[1], l[2], 'server_info', 'allgather_reducescatter', 'auto', "
        "'compressed-tensors', 'vllm serve MODEL -tp 8 --profiler-config ...', "
        "'/data/vllm-profiles/' || p.run_id, 8, 95.0 + p.idx % 60, 256, 32, 1000, 128 FROM "
        f"(SELECT *, list_extract({LAYOUTS}, idx % 4 + 1) AS l FROM plan) p "
        "WHERE p.verb = 'vllm-profile'"
    )  # fmt: skip
    con.execute(
        "INSERT INTO vllm_load SELECT p.run_id, r.i, r.i / 32 * 2.5, 120 + (hash(p.idx, r.i) "
        "% 200), 11 + (hash(r.i, p.idx) % 400) / 100.0, 1500 + r.i % 300, 11.5, 40.0, 128, "
        "1000, 128, CASE WHEN r.i = 255 AND p.status = 'partial' THEN 'timeout' END "
        "FROM plan p, range(256) r(i) WHERE p.verb IN ('vllm-profile', 'sglang-profile')"
    )  # fmt: skip


def insert_sglang_servers(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO sglang_server SELECT p.run_id, 'http://127.0.0.1:30000', "
        f"list_extract({MODELS}, p.idx % 3 + 1), '0.5.4', l[3], 1, l[4], l[5], l[1], l[2], "
        "'server_info', 'python -m sglang.launch_server --tp 8 ...', p.run_id, "
        "'/data/sglang-profiles/' || p.run_id, 8, 40.0 + p.idx % 30, 256, 32, 1000, 128 FROM "
        f"(SELECT *, list_extract({LAYOUTS}, idx % 4 + 1) AS l FROM plan) p "
        "WHERE p.verb = 'sglang-profile'"
    )  # fmt: skip


# Profile runs record their model's config.json as the collector does on a host that holds
# the checkpoint: here the real HF configs copied into tests/fixtures.
CONFIG_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "serving" / "configs"
CONFIG_FILES = {"moonshotai/Kimi-K2.5": "moonshotai--Kimi-K2.5_config.json",
                "deepseek-ai/DeepSeek-V3": "deepseek-ai--DeepSeek-V3_config.json",
                "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5_config.json"}  # fmt: skip


def insert_model_configs(con: duckdb.DuckDBPyConnection, config_dir: Path = CONFIG_DIR) -> int:
    """One ``serving_model_config`` row per profile run whose model's config is found;
    returns how many models had one."""
    found = [(m, str(config_dir / f), (config_dir / f).read_text())
             for m, f in CONFIG_FILES.items() if (config_dir / f).is_file()]  # fmt: skip
    if not found:
        return 0
    con.execute("CREATE TEMP TABLE scale_configs (model_id VARCHAR, source_path VARCHAR, "
                "config_json VARCHAR)")  # fmt: skip
    con.executemany("INSERT INTO scale_configs VALUES (?, ?, ?)", found)
    con.execute(
        "INSERT INTO serving_model_config SELECT p.run_id, c.model_id, c.source_path, "
        "c.config_json, NULL FROM plan p JOIN scale_configs c "
        f"ON c.model_id = list_extract({MODELS}, p.idx % 3 + 1) "
        "WHERE p.verb IN ('vllm-profile', 'sglang-profile')"
    )  # fmt: skip
    con.execute("DROP TABLE scale_configs")
    return len(found)


def insert_metrics(con: duckdb.DuckDBPyConnection) -> None:
    """Counters grow with the scrape number, so interval deltas are positive."""
    hist = ", ".join(f"('{m}', {mean})" for m, mean in HISTOGRAMS)
    buckets = ", ".join(str(b) for b in BUCKETS)
    base = ("INSERT INTO serving_metrics_samples SELECT p.run_id, 'vllm', p.started_at, "
            "'http://127.0.0.1:8000', {metric}, {kind}, {sample}, 'moonshotai/Kimi-K2.5', "
            "'0', {labels}, {le}, {value} FROM plan p{more} WHERE p.verb = 'vllm-metrics'")  # fmt: skip
    n = "(p.scrape // 4 + 1)"  # scrape number of this server
    gauges = ("(VALUES ('vllm:num_requests_running', 24.0), ('vllm:num_requests_waiting', 3.0), "
              "('vllm:kv_cache_usage_perc', 0.42)) g(m, v)")  # fmt: skip
    con.execute(base.format(metric="g.m", kind="'gauge'", sample="g.m", labels="'{}'", le="NULL",
                            value="g.v * (0.8 + (p.h % 40) / 100.0)", more=", " + gauges))  # fmt: skip
    counters = ("(VALUES ('vllm:prompt_tokens', 60000.0, NULL), ('vllm:generation_tokens', "
                "30000.0, NULL), ('vllm:num_preemptions', 2.0, NULL), ('vllm:request_success', "
                "50.0, 'stop'), ('vllm:request_success', 8.0, 'length'), ('vllm:request_success', "
                "0.5, 'abort'), ('vllm:request_success', 0.0, 'error')) c(m, rate, reason)")  # fmt: skip
    con.execute(base.format(
        metric="c.m", kind="'counter'", sample="c.m || '_total'",
        labels="CASE WHEN c.reason IS NULL THEN '{}' ELSE '{\"finished_reason\": \"' || "
               "c.reason || '\"}' END",
        le="NULL", value=f"c.rate * {n}", more=", " + counters))  # fmt: skip
    hists = f"(VALUES {hist}) hm(m, mean)"
    con.execute(base.format(
        metric="hm.m", kind="'histogram'", sample="hm.m || '_bucket'", labels="'{}'",
        le="b.le", value=f"round(600 * {n} * (1 - exp(-b.le / hm.mean)))",
        more=f", {hists}, (SELECT unnest([{buckets}, 'inf'::DOUBLE]) AS le) b"))  # fmt: skip
    con.execute(base.format(
        metric="hm.m", kind="'histogram'", sample="hm.m || s.suffix", labels="'{}'", le="NULL",
        value=f"600 * {n} * CASE s.suffix WHEN '_sum' THEN hm.mean ELSE 1 END",
        more=f", {hists}, (VALUES ('_sum'), ('_count')) s(suffix)"))  # fmt: skip
