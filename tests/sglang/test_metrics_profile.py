"""``sglang-metrics`` and ``sglang-profile`` against the real SGLang-shaped HTTP server
(tests/sglang/server.py: SGLang collector.py 00ae9c15 metric names, http_server.py profile
routes, scheduler_profiler_mixin.py ``{profile_id}-TP-{rank}.trace.json.gz`` files)."""

from __future__ import annotations

import pandas as pd
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
    labels = query(store_path, "SELECT DISTINCT engine, labels FROM serving_metrics_samples "
                   "WHERE sample = 'sglang:num_running_reqs'")  # fmt: skip
    assert labels == [("sglang", '{"engine_type": "unified", "pp_rank": "0", "tp_rank": "0"}')]
    assert query(store_path, "SELECT DISTINCT json_extract_string(env, '$.sglang') "
                 "FROM runs") == [("0.5.4",)]  # fmt: skip
    # What the Serving page reads: the server listed as SGLang, interval rates and latencies.
    from store.location import resolve
    from store.queries import serving as qs

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


DOCS_EXAMPLE = FIXTURES / "serving" / "metrics" / "sglang_production_metrics.prom"


def test_one_scrape_of_the_docs_example_reads_on_the_page(sglang_server, store_path) -> None:
    """SGLang's own docs' /metrics (12 families; func_latency_seconds labelled `name`, no
    model): one scrape is a server with gauges and no interval yet (issue 20: it crashed)."""
    from store.location import resolve
    from store.queries import serving as qs

    server = sglang_server(metrics_file=str(DOCS_EXAMPLE))
    res = run_cli(store_path, "sglang-metrics", "--url", server.url, "--json")
    assert res.code == 0, res.stderr
    assert res.json["samples"] == 91 and res.json["models"] == ["meta-llama/Llama-3.1-8B-Instruct"]
    loc = resolve(str(store_path))
    servers = qs.metric_servers(loc)  # the model-less family is no served model of its own
    assert servers[["engine", "model_name", "scrapes"]].values.tolist() == [
        ["sglang", "meta-llama/Llama-3.1-8B-Instruct", 1]]  # fmt: skip
    row = servers.iloc[0]
    timeline = qs.metrics_timeline(loc, row["host"], row["url"], row["model_name"], "2000-01-01",
                                   "sglang")  # fmt: skip
    assert timeline[["running", "waiting", "kv_cache_usage", "gen_throughput"]].values.tolist() \
        == [[162.0, 2826.0, 0.28, pytest.approx(86.508, abs=1e-3)]]  # fmt: skip
    assert timeline[["generation_tokens_per_s", "mean_itl_ms"]].isna().all().all()  # no delta
    # its per-token histogram is the older name, observed once per output token
    assert qs.per_token_histogram(loc, "sglang", row["host"], row["url"], row["model_name"]) \
        == ("sglang:time_per_output_token_seconds", "ITL")  # fmt: skip
    quant = qs.interval_quantiles(loc, row["host"], row["url"], row["model_name"],
                                  "sglang:time_per_output_token_seconds", "2000-01-01")  # fmt: skip
    assert quant.empty and str(quant["scraped_at"].dtype) == str(timeline["scraped_at"].dtype)
    # A NULL model read back from a frame is NaN: it must bind as text, not as a DOUBLE
    for model in (float("nan"), None):
        assert qs.metrics_timeline(loc, row["host"], row["url"], model, "2000-01-01",
                                   "sglang").empty  # fmt: skip
        assert qs.interval_quantiles(loc, row["host"], row["url"], model,
                                     "sglang:func_latency_seconds", "2000-01-01").empty  # fmt: skip
    # a second scrape of the same (unchanged) server: an interval, with nothing generated
    assert run_cli(store_path, "sglang-metrics", "--url", server.url).code == 0
    timeline = qs.metrics_timeline(loc, row["host"], row["url"], row["model_name"], "2000-01-01",
                                   "sglang")  # fmt: skip
    assert len(timeline) == 2 and timeline["generation_tokens_per_s"].iloc[1] == 0.0
    assert pd.isna(timeline["mean_itl_ms"].iloc[1])  # no token observed in the interval


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


def test_cuda_profiler_under_nsys_ingests_the_report(sglang_server, store_path, tmp_path):
    """Issue 43 item 4: with --nsys-report the CUDA_PROFILER activity is sent (the base GPU's
    cudaProfilerStart/Stop bound nsys's capture range) and nsys's report is ingested."""
    from tests.trace.conftest import fixture
    from tests.trace.nsys_twin import write_twin

    source = write_twin([fixture("tracelens/sglang_qwen3_8b_decode.json.gz")],
                        tmp_path / "source.sqlite")  # fmt: skip
    report = tmp_path / "sglang.sqlite"
    server = sglang_server(nsys_report=str(report), nsys_source=str(source), flush_delay_s=1.0)
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--nsys-report",
                  str(report), *FAST, "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert res.json["trace_files"] == [str(report)]
    assert query(store_path, "SELECT count(*), any_value(step_source), sum(kernels) > 0 "
                 "FROM trace_ranks") == [(1, "vllm", True)]  # fmt: skip
    res = run_cli(store_path, "sglang-profile", "--url", server.url, "--nsys-report",
                  str(report), "--activities", "CPU,GPU")  # fmt: skip
    assert res.code == 1 and "add CUDA_PROFILER" in res.stderr
