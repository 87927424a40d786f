"""``sglang-metrics`` and ``sglang-profile`` against the real SGLang-shaped HTTP server
(tests/sglang/server.py: SGLang collector.py 00ae9c15 metric names, http_server.py profile
routes, scheduler_profiler_mixin.py ``{profile_id}-TP-{rank}.trace.json.gz`` files)."""

from __future__ import annotations

import pytest

from collectors.serving.load import LoadSpec, run_load
from tests.helpers import FIXTURES, query, run_cli
from tests.sglang.conftest import MODEL

FAST = ("--num-requests", "6", "--concurrency", "3", "--input-len", "8", "--output-len", "12",
        "--settle", "1", "--flush-timeout", "30")  # fmt: skip


def test_two_scrapes_fill_the_sglang_view(sglang_server, store_path) -> None:
    server = sglang_server()
    first = run_cli(store_path, "sglang-metrics", "--url", server.url, "--json")
    assert first.code == 0, first.stderr
    assert first.json["sglang_version"] == "0.5.4" and first.json["models"] == [MODEL]
    run_load(LoadSpec(server.url, MODEL, num_requests=4, concurrency=2, input_len=8,
                      output_len=10))  # fmt: skip
    second = run_cli(store_path, "sglang-metrics", "--url", server.url, "--json")
    assert second.code == 0, second.stderr
    rows = query(store_path, "SELECT generation_tokens, requests_finished, itl_count, "
                 "kv_cache_usage FROM v_sglang_scrapes ORDER BY scraped_at")  # fmt: skip
    assert rows[0][:2] == (0.0, 0.0) and rows[1][:3] == (40.0, 4.0, 36.0)
    labels = query(store_path, "SELECT DISTINCT labels FROM vllm_metrics_samples "
                   "WHERE sample = 'sglang:num_running_reqs'")  # fmt: skip
    assert labels == [('{"engine_type": "unified", "pp_rank": "0", "tp_rank": "0"}',)]
    assert query(store_path, "SELECT DISTINCT json_extract_string(env, '$.sglang') "
                 "FROM runs") == [("0.5.4",)]  # fmt: skip
    # What the Serving page reads: the server listed as SGLang, interval rates and latencies.
    from store import queries_serving as qs
    from store.location import resolve

    loc = resolve(str(store_path))
    servers = qs.metric_servers(loc)
    assert servers[["engine", "url", "model_name", "scrapes"]].values.tolist() == [
        ["sglang", server.url, MODEL, 2]]  # fmt: skip
    host = servers["host"].iloc[0]
    timeline = qs.metrics_timeline(loc, host, server.url, MODEL, "2000-01-01", "sglang")
    assert timeline["generation_tokens_per_s"].iloc[1] > 0
    assert timeline["mean_itl_ms"].iloc[1] > 0 and timeline["mean_tpot_ms"].isna().all()
    quant = qs.interval_quantiles(loc, host, server.url, MODEL,
                                  "sglang:inter_token_latency_seconds", "2000-01-01")  # fmt: skip
    assert quant["observations"].tolist() == [36.0]
    assert query(store_path, "SELECT count(*) FROM v_vllm_scrapes") == [(0,)]  # not vLLM's


def test_metrics_off_is_one_line(sglang_server, store_path) -> None:
    server = sglang_server(metrics=False)
    res = run_cli(store_path, "sglang-metrics", "--url", server.url)
    assert res.code == 1 and "is " in res.stderr and "SGLang server?" in res.stderr
    assert "Traceback" not in res.stderr and not store_path.exists()


def test_profile_waits_for_every_tp_rank_and_ingests(sglang_server, sglang_traces, store_path):
    pytest.importorskip("collectors.trace.ingest", reason="trace ingest not in tree")
    # tp=2 from /get_server_info; gzip streams written straight into the final names.
    server = sglang_server(traces=sglang_traces, flush_delay_s=1.5)
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), *FAST, "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    out = res.json
    assert out["layout"] == "TP2" and out["sglang_version"] == "0.5.4"
    assert len(out["trace_files"]) == 2 and all("-TP-" in f for f in out["trace_files"])
    row = query(store_path, "SELECT model_id, tp, layout_kind, layout_source, trace_files, "
                "sglang_version FROM v_sglang_servers")  # fmt: skip
    assert row == [(MODEL, 2, "tp", "server_info", 2, "0.5.4")]
    # SGLang's step ranges found by the trace ingest (collectors/trace/steps.py).
    assert query(store_path, "SELECT count(*), min(steps), any_value(step_source) "
                 "FROM trace_ranks") == [(2, 3, "sglang")]  # fmt: skip
    assert query(store_path, "SELECT count(*), count(error) FROM vllm_load") == [(6, 0)]


def test_profile_with_num_steps_stops_by_itself(sglang_server, sglang_traces, store_path):
    pytest.importorskip("collectors.trace.ingest", reason="trace ingest not in tree")
    server = sglang_server(traces=sglang_traces)
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), *FAST, "--num-steps", "5", "--server-args",
                  "--tp 2", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT layout_source FROM sglang_server") == [("server-args",)]


def test_profile_bad_inputs(sglang_server, store_path, tmp_path) -> None:
    server = sglang_server()
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), "--activities", "MEM")  # fmt: skip
    assert res.code == 1 and "no CPU or GPU" in res.stderr
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--trace-dir",
                  str(tmp_path / "nope"))  # fmt: skip
    assert res.code == 1 and "no such folder" in res.stderr and "Traceback" not in res.stderr


FIXTURE = FIXTURES / "traces" / "tracelens" / "sglang_qwen3_8b_decode.json.gz"


@pytest.mark.skipif(not FIXTURE.exists(), reason="tests/fixtures (real SGLang trace) absent")
def test_profile_ingests_a_real_sglang_trace(sglang_server, store_path):
    """A real SGLang decode trace (Qwen3-8B, world 1, ``step[DECODE bs=32]``; TraceLens test
    data) exported by the test server as its one TP rank's file."""
    pytest.importorskip("collectors.trace.ingest", reason="trace ingest not in tree")
    server = sglang_server(traces=[FIXTURE], tp=1)
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), *FAST, "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert res.json["layout"] == "TP1" and len(res.json["trace_files"]) == 1
    ranks = query(store_path, "SELECT count(*), min(steps) FROM trace_ranks")
    assert ranks[0][0] == 1 and ranks[0][1] >= 1
    assert query(store_path, "SELECT status FROM runs") == [("ok",)]
