"""``vllm-profile`` against a real HTTP server that writes real rank traces on /stop_profile."""

from __future__ import annotations

import gzip
import os
import socket

import pytest

from tests.helpers import query, run_cli

FAST = ("--num-requests", "6", "--concurrency", "3", "--input-len", "8", "--output-len", "12",
        "--settle", "1", "--flush-timeout", "30")  # fmt: skip


def _profile(store, server, *extra: str, **env: str):
    return run_cli(store, "vllm-profile", "--url", server.url, "--trace-dir",
                   str(server.trace_dir), *FAST, *extra, **env)  # fmt: skip


def test_profile_ingests_every_rank_with_load_and_layout(vllm_server, rank_traces, store_path):
    pytest.importorskip("collectors.trace.ingest", reason="trace ingest (issue 3) not in tree")
    server = vllm_server(traces=rank_traces)
    res = _profile(store_path, server, "--server-args", "vllm serve moonshotai/Kimi-K2.5 -tp 2",
                   "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    out = res.json
    assert out["committed"] and out["vllm_version"] == "0.16.0" and out["layout"] == "TP2"
    assert len(out["trace_files"]) == 2 and all(".tmp" not in f for f in out["trace_files"])
    assert "waiting for trace files" in res.stderr or "final after" in res.stderr
    run_id = out["run_id"]
    assert query(store_path, "SELECT verb, vllm FROM v_runs WHERE run_id = ?", [run_id]) == [
        ("vllm-profile", "0.16.0")]  # fmt: skip
    server_row = query(store_path, "SELECT model_id, tp, dp, ep, layout_kind, trace_files, "
                       "max_model_len FROM v_vllm_servers WHERE run_id = ?", [run_id])  # fmt: skip
    assert server_row == [("moonshotai/Kimi-K2.5", 2, 1, False, "tp", 2, 8192)]
    load = query(store_path, "SELECT count(*), count(ttft_ms), min(output_tokens), "
                 "max(output_tokens), count(error) FROM vllm_load WHERE run_id = ?", [run_id])  # fmt: skip
    assert load == [(6, 6, 12, 12, 0)]
    ranks = query(store_path, "SELECT count(*) FROM trace_ranks WHERE run_id = ?", [run_id])
    assert ranks[0][0] == 2
    from store.location import resolve
    from store.queries import serving as qs

    runs = qs.profile_runs(resolve(str(store_path)))
    assert runs["run_id"].tolist() == [run_id] and runs["completed"].iloc[0] == 6
    assert runs["median_tpot_ms"].iloc[0] > 0


def test_layout_from_file_names_and_api_key(vllm_server, rank_traces, store_path):
    pytest.importorskip("collectors.trace.ingest", reason="trace ingest (issue 3) not in tree")
    server = vllm_server(traces=rank_traces, api_key="s3cret")
    res = _profile(store_path, server)
    assert res.code == 1 and "--api-key: " in res.stderr and "HTTP 401" in res.stderr
    res = _profile(store_path, server, "--json", VLLM_API_KEY="s3cret")
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT tp, layout_source FROM vllm_server") == [(2, "trace-files")]
    args = query(store_path, "SELECT args FROM runs")[0][0]
    assert "s3cret" not in args and "trace_dir" in args  # the key is never stored


@pytest.mark.parametrize(("version", "flag"), [
    ("0.16.0", "--profiler-config '{\"profiler\":\"torch\",\"torch_profiler_dir\":"),
    ("0.11.2", "VLLM_TORCH_PROFILER_DIR="),
])  # fmt: skip
def test_profiler_not_enabled_names_the_flag(vllm_server, store_path, version, flag):
    server = vllm_server(profiler=False, version=version)
    res = _profile(store_path, server)
    assert res.code == 1
    line = res.stderr.strip().splitlines()[-1]
    assert "profiler is not enabled" in line and "404" in line and flag in line
    assert str(server.trace_dir) in line and "Traceback" not in res.stderr
    # ProfilerConfig (>= 0.13) has ignore_frontend: the hint keeps the API server's trace out.
    assert ('"ignore_frontend":true' in line) == version.startswith("0.16")
    assert not store_path.exists()


def test_server_down(store_path, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli(store_path, "vllm-profile", "--url", f"http://127.0.0.1:{port}",
                  "--trace-dir", str(tmp_path))  # fmt: skip
    assert res.code == 1
    assert "vLLM server down?" in res.stderr and "Traceback" not in res.stderr


def test_server_dying_mid_load_fails_the_run(vllm_server, rank_traces, store_path):
    # warm-up takes 4 chunks; the server process exits during the profiled load.
    server = vllm_server(traces=rank_traces, die_after_chunks=20, token_delay_s=0.01)
    res = _profile(store_path, server)
    assert res.code == 1, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "load request(s) failed - did the server stop?" in line, res.stderr
    assert server.proc.wait(5) == 3 and not store_path.exists()


def test_trace_files_that_stay_tmp_time_out(vllm_server, rank_traces, store_path):
    server = vllm_server(traces=rank_traces, stay_tmp=True)
    res = run_cli(store_path, "vllm-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), *FAST[:-2], "--flush-timeout", "4")  # fmt: skip
    assert res.code == 1
    line = res.stderr.strip().splitlines()[-1]
    assert "2 trace file(s) still .tmp after" in line and ".pt.trace.json.gz.tmp" in line
    assert not store_path.exists()


def test_trace_files_never_appearing(vllm_server, store_path):
    server = vllm_server(traces=[])  # the profiler "runs" but writes nothing into this dir
    res = run_cli(store_path, "vllm-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), *FAST[:-2], "--flush-timeout", "2")  # fmt: skip
    assert res.code == 1
    assert "no trace file appeared within 2 s" in res.stderr.strip().splitlines()[-1]


def test_bad_inputs_are_one_line(vllm_server, store_path, tmp_path):
    res = run_cli(store_path, "vllm-profile", "--url", "http://127.0.0.1:1", "--trace-dir",
                  str(tmp_path / "missing"))  # fmt: skip
    assert res.code == 1 and "--trace-dir" in res.stderr and "no such folder" in res.stderr
    server = vllm_server()
    res = run_cli(store_path, "vllm-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), "--model", "nope")  # fmt: skip
    assert res.code == 1 and "--model nope: not served" in res.stderr


def test_gzip_written_straight_to_its_final_name_is_awaited(vllm_server, rank_traces,
                                                            store_path):  # fmt: skip
    """torch's export_chrome_trace gzips into the final name (no .tmp): a half-written .gz,
    unchanged for longer than a poll, must not be taken (issue 10 item 9)."""
    pytest.importorskip("collectors.trace.ingest", reason="trace ingest (issue 3) not in tree")
    server = vllm_server(traces=rank_traces, gz_direct=True, flush_delay_s=3.0)
    res = _profile(store_path, server, "--server-args", "-tp 2", "--json")
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT status, count(*) FROM v_runs r JOIN trace_ranks t "
                 "USING (run_id) GROUP BY status") == [("ok", 2)]  # fmt: skip


def test_cuda_profiler_fails_fast(vllm_server, store_path):
    server = vllm_server(traces=[])  # routes mounted, nothing written: vLLM's CUDA profiler
    res = _profile(store_path, server, "--server-args",
                   "-tp 2 --profiler-config '{\"profiler\":\"cuda\"}'")  # fmt: skip
    line = res.stderr.strip().splitlines()[-1]
    assert res.code == 1 and "CUDA one (nsys)" in line and "--profiler-config" in line
    server = vllm_server(traces=[], server_info={"profiler_config": {"profiler": "cuda"},
                                                 "parallel_config": {"tensor_parallel_size": 2}})  # fmt: skip
    res = _profile(store_path, server)
    assert res.code == 1 and "CUDA one (nsys)" in res.stderr
    # Nothing says so up front: an empty folder after a successful /stop_profile fails fast
    # (--flush-timeout is 30 in FAST; the grace is 1 s).
    res = _profile(store_path, vllm_server(traces=[]), "--no-trace-grace", "1")
    line = res.stderr.strip().splitlines()[-1]
    assert res.code == 1 and "no trace file appeared within 1 s of a successful" in line
    assert "CUDA (nsys) profiler" in line and not store_path.exists()


def test_each_ingest_warning_is_logged_once(vllm_server, rank_traces, store_path, tmp_path):
    empty = tmp_path / "empty.pt.trace.json.gz"
    empty.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    server = vllm_server(traces=[*rank_traces, empty])
    res = _profile(store_path, server)
    assert res.code == 0, res.stderr
    skipped = [line for line in res.stderr.splitlines() if "no events in traceEvents" in line]
    assert len(skipped) == 1, res.stderr


def test_cuda_profiler_under_nsys_ingests_the_report(vllm_server, store_path, tmp_path):
    """Issue 43 item 4: a server run under nsys with the CUDA profiler: /start_profile and
    /stop_profile as always, then the report nsys writes (here an export of vLLM's real
    MI300X decode step in the nsys 2024.5 schema, written in pieces) is ingested."""
    from tests.trace.conftest import fixture
    from tests.trace.nsys_twin import write_twin

    source = write_twin([fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")],
                        tmp_path / "source.sqlite")  # fmt: skip
    reports = tmp_path / "nsys"
    reports.mkdir()
    stale = reports / "report0.sqlite"  # an earlier capture's report is never taken
    stale.write_bytes(b"SQLite format 3\x00 of yesterday")
    os.utime(stale, (1_000_000, 1_000_000))
    server = vllm_server(traces=[], nsys_report=str(reports / "report1.sqlite"),
                         nsys_source=str(source), flush_delay_s=1.5,
                         server_info={"profiler_config": {"profiler": "cuda"}})  # fmt: skip
    res = run_cli(store_path, "vllm-profile", "--url", server.url, "--nsys-report", str(reports),
                  *FAST, "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    out = res.json
    assert out["trace_files"] == [str(reports / "report1.sqlite")]
    assert out["trace"]["step_source"] == "vllm" and out["trace"]["graph_mode"] is True
    assert query(store_path, "SELECT verb, count(t.rank), sum(t.kernels) FROM v_runs r JOIN "
                 "trace_ranks t USING (run_id) GROUP BY verb") == [("vllm-profile", 1, 434)]  # fmt: skip
    assert query(store_path, "SELECT count(*) FROM vllm_load") == [(6,)]
    # the report named exactly (the -o NAME), and nothing written: one line, no run
    none_server = vllm_server(traces=[], server_info={"profiler_config": {"profiler": "cuda"}})
    res = run_cli(store_path, "vllm-profile", "--url", none_server.url, "--nsys-report",
                  str(tmp_path / "nsys" / "report9"), *FAST[:-2], "--flush-timeout", "2")  # fmt: skip
    line = res.stderr.strip().splitlines()[-1]
    assert res.code == 1 and "no Nsight Systems report written within 2 s" in line
