"""``vllm-bench``: importing `vllm bench serve --save-result` files (shape: bench_fixtures.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from collectors.serving.vllm import bench, layout
from tests.helpers import query, run_cli
from tests.vllm import bench_fixtures


def test_import_sweep_folder_with_metadata_layout(tmp_path: Path, store_path: Path) -> None:
    bench_fixtures.write_sweep(tmp_path / "tp8", tp=8)
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json")
    assert res.code == 0, res.stderr
    assert res.json["concurrency"] == [1, 4, 16, 64] and res.json["layouts"] == ["TP8"]
    rows = query(store_path, "SELECT concurrency, layout, layout_kind, layout_source, "
                 "median_tpot_ms, p90_tpot_ms, p99_itl_ms, output_throughput, input_len, "
                 "output_len, request_rate FROM v_serving_bench ORDER BY concurrency")  # fmt: skip
    assert [r[0] for r in rows] == [1, 4, 16, 64]
    c16 = rows[2]
    obj = bench_fixtures.result(16, tp=8)
    assert c16[1:4] == ("TP8", "tp", "metadata")
    assert c16[4] == pytest.approx(obj["median_tpot_ms"])
    assert c16[5] == pytest.approx(obj["p90_tpot_ms"])
    assert c16[6] == pytest.approx(obj["p99_itl_ms"])
    assert c16[7] == pytest.approx(obj["output_throughput"])
    assert c16[8:10] == (1024.0, 256.0) and c16[10] is None  # request_rate "inf" -> NULL
    extra = json.loads(query(store_path, "SELECT extra FROM serving_bench LIMIT 1")[0][0])
    assert "p50_ttft_ms" in extra and "latencies" not in extra

    again = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json")
    assert again.code == 0 and again.json["run_id"] == res.json["run_id"]
    assert "already in the store" in again.stderr
    assert query(store_path, "SELECT count(*) FROM serving_bench") == [(4,)]


def test_server_args_override_and_append_result_lines(tmp_path: Path, store_path: Path) -> None:
    # --append-result: one JSON object per line in one file; no metadata in the results.
    objs = [bench_fixtures.result(c, tp=8, metadata=False) for c in (1, 8)]
    path = tmp_path / "appended.json"
    path.write_text("\n".join(json.dumps(o) for o in objs))
    res = run_cli(store_path, "vllm-bench", "--results", str(path), "--server-args",
                  "vllm serve moonshotai/Kimi-K2.5 -tp 8 --enable-expert-parallel",
                  "--vllm-version", "0.16.0", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT concurrency, layout, layout_kind, ep, vllm_version "
                 "FROM serving_bench ORDER BY concurrency")  # fmt: skip
    assert rows == [(1, "TP8+EP", "tp_ep_dp1", True, "0.16.0"),
                    (8, "TP8+EP", "tp_ep_dp1", True, "0.16.0")]  # fmt: skip


def test_unknown_layout_is_stored_and_said(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(bench_fixtures.result(2, metadata=False)))
    res = run_cli(store_path, "vllm-bench", "--results", str(path))
    assert res.code == 0 and "without a known layout; pass --server-args" in res.stderr
    row = query(store_path, "SELECT b.layout, r.message FROM v_serving_bench b "
                "JOIN v_runs r USING (run_id)")  # fmt: skip
    assert row[0][0] is None and "without a known layout" in row[0][1]


@pytest.mark.parametrize(("content", "expect"), [
    ("{not json", "not JSON"),
    (json.dumps({"date": "x", "model_id": "m"}), "not a serving benchmark result"),
])  # fmt: skip
def test_bad_files_are_one_line(tmp_path, store_path, content, expect) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    res = run_cli(store_path, "vllm-bench", "--results", str(path))
    assert res.code == 1 and expect in res.stderr and "Traceback" not in res.stderr
    assert str(path) in res.stderr and not store_path.exists()


def test_mode_and_missing_vllm_errors(tmp_path, store_path) -> None:
    res = run_cli(store_path, "vllm-bench")
    assert res.code == 1 and "give either --results" in res.stderr
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "nothing"))
    assert res.code == 1 and "no such file or folder" in res.stderr
    res = run_cli(store_path, "vllm-bench", "--url", "http://127.0.0.1:1",
                  "--vllm-bin", str(tmp_path / "no-vllm"))  # fmt: skip
    assert res.code == 1 and "`vllm bench serve` cannot run here" in res.stderr


def test_sweep_command_uses_real_bench_serve_flags(tmp_path) -> None:
    args = argparse.Namespace(num_prompts=None, input_len=512, output_len=64, vllm_bin="vllm",
                              bench_args="--seed 7")  # fmt: skip
    lay = layout.from_server_args("-tp 4 -dp 2 --enable-expert-parallel")
    card = {"id": "kimi", "root": "/models/Kimi-K2.5"}  # served under another name
    cmd = bench.build_command(args, "http://h:8000", card, 8, tmp_path, lay)
    assert cmd[:3] == ["vllm", "bench", "serve"]
    joined = " ".join(cmd)
    for part in ("--max-concurrency 8", "--num-prompts 32", "--random-input-len 512",
                 "--random-output-len 64", "--save-result", f"--result-dir {tmp_path}",
                 "--metric-percentiles 50,90,99", "--metadata tp=4 pp=1 dp=2 ep=1",
                 "--seed 7", "--model /models/Kimi-K2.5 --served-model-name kimi"):  # fmt: skip
        assert part in joined


def test_sweep_server_answers_are_one_line(vllm_server, tmp_path, store_path) -> None:
    fake_vllm = tmp_path / "vllm"  # never reached: the server check comes first
    fake_vllm.write_text("#!/bin/sh\nexit 0\n")
    fake_vllm.chmod(0o755)
    server = vllm_server(api_key="s3cret")
    sweep = ("vllm-bench", "--url", server.url, "--concurrency", "1", "--vllm-bin", str(fake_vllm))
    res = run_cli(store_path, *sweep)
    assert res.code == 1 and "--api-key: " in res.stderr and "HTTP 401" in res.stderr
    assert "server down?" not in res.stderr and "Traceback" not in res.stderr
    res = run_cli(store_path, "vllm-bench", "--url", "http://127.0.0.1:1", "--concurrency", "1",
                  "--vllm-bin", str(fake_vllm))  # fmt: skip
    assert res.code == 1 and "vLLM server down?" in res.stderr, res.stderr
