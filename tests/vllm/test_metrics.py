"""``vllm-metrics`` against a real HTTP server: scrapes, deltas between them, failures."""

from __future__ import annotations

import socket

from collectors.serving.load import LoadSpec, run_load
from tests.helpers import FIXTURES, query, run_cli
from tests.vllm.conftest import MODEL


def test_two_scrapes_give_interval_rates_and_latencies(vllm_server, store_path) -> None:
    server = vllm_server()
    first = run_cli(store_path, "vllm-metrics", "--url", server.url, "--json")
    assert first.code == 0, first.stderr
    assert first.json["vllm_version"] == "0.16.0" and first.json["models"] == [MODEL]
    results = run_load(LoadSpec(server.url, MODEL, num_requests=6, concurrency=3,
                                input_len=16, output_len=20))  # fmt: skip
    assert all(r.ok for r in results)
    second = run_cli(store_path, "vllm-metrics", "--url", server.url + "/v1/", "--json")
    assert second.code == 0, second.stderr

    rows = query(store_path, "SELECT run_id, prev_run_id, generation_tokens_per_s, mean_itl_ms, "
                 "mean_tpot_ms, mean_ttft_ms, requests_per_s FROM v_vllm_metrics_deltas "
                 "ORDER BY scraped_at")  # fmt: skip
    assert [r[0] for r in rows] == [first.json["run_id"], second.json["run_id"]]
    assert rows[0][1:] == (None,) * 6  # the first scrape has nothing to compare with
    prev, gen_rate, itl, tpot, ttft, req_rate = rows[1][1:]
    assert prev == first.json["run_id"]
    assert gen_rate > 0 and req_rate > 0
    assert 0 < itl < 1000 and 0 < tpot < 1000 and 0 < ttft < 1000
    # The counters moved by exactly what the load generated: 6 requests x 20 tokens.
    gen = query(store_path, "SELECT generation_tokens FROM v_vllm_scrapes ORDER BY scraped_at")
    assert gen[1][0] - gen[0][0] == 120
    added = query(store_path, "SELECT sum(added) FROM v_vllm_histogram_deltas WHERE run_id = ? "
                  "AND metric = 'vllm:e2e_request_latency_seconds' AND le = 'inf'",
                  [second.json["run_id"]])  # fmt: skip
    assert added[0][0] == 6
    version = query(store_path, "SELECT vllm FROM v_runs WHERE run_id = ?", [first.json["run_id"]])
    assert version == [("0.16.0",)]

    # What the Serving page reads: interval quantiles interpolated from the bucket deltas.
    from store.location import resolve
    from store.queries import serving as qs

    loc = resolve(str(store_path))
    servers = qs.metric_servers(loc)
    assert servers[["url", "model_name", "scrapes"]].values.tolist() == [[server.url, MODEL, 2]]
    host = servers["host"].iloc[0]
    quant = qs.interval_quantiles(loc, host, server.url, MODEL,
                                  "vllm:request_time_per_output_token_seconds", "2000-01-01")  # fmt: skip
    assert quant["run_id"].tolist() == [second.json["run_id"]]
    assert quant["observations"].iloc[0] == 6
    assert 0 < quant["p50_ms"].iloc[0] <= quant["p99_ms"].iloc[0] <= 10.0  # first bucket: 10 ms


RECORDED = FIXTURES / "serving" / "metrics" / "vllm_aibrix_runtime_metrics.prom"


def test_one_scrape_of_a_recorded_v0_server(vllm_server, store_path) -> None:
    """A vLLM 0.7 /metrics as printed by vllm-project/aibrix's docs: V0 names
    (gpu_cache_usage_perc), model-less families (cache_config_info, lora_requests_info), no
    engine label and no latency histogram: one server, one scrape, nothing to subtract."""
    from store.location import resolve
    from store.queries import serving as qs

    server = vllm_server(metrics_file=str(RECORDED))
    res = run_cli(store_path, "vllm-metrics", "--url", server.url, "--json")
    assert res.code == 0, res.stderr
    assert res.json["samples"] == 29 and res.json["models"] == ["Qwen/Qwen2.5-Coder-1.5B-Instruct"]
    assert query(store_path, "SELECT count(*), count(engine_index), count(DISTINCT engine) "
                 "FROM serving_metrics_samples") == [(29, 0, 1)]  # fmt: skip
    loc = resolve(str(store_path))
    servers = qs.metric_servers(loc)
    assert servers[["engine", "model_name", "scrapes"]].values.tolist() == [
        ["vllm", "Qwen/Qwen2.5-Coder-1.5B-Instruct", 1]]  # fmt: skip
    row = servers.iloc[0]
    timeline = qs.metrics_timeline(loc, row["host"], row["url"], row["model_name"], "2000-01-01")
    assert timeline[["running", "waiting", "kv_cache_usage"]].values.tolist() == [[0.0, 0.0, 0.0]]
    assert timeline["mean_tpot_ms"].isna().all()
    assert qs.per_token_histogram(loc, "vllm", row["host"], row["url"], row["model_name"]) is None


def test_server_down_is_one_clear_line(store_path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli(store_path, "vllm-metrics", "--url", f"http://127.0.0.1:{port}")
    assert res.code == 1
    assert "vLLM server down?" in res.stderr and "Traceback" not in res.stderr
    assert not store_path.exists()


def test_bad_url_is_input_error(store_path) -> None:
    res = run_cli(store_path, "vllm-metrics", "--url", "ftp://nowhere")
    assert res.code == 1 and "--url" in res.stderr and "Traceback" not in res.stderr
