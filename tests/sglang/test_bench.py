"""``sglang-bench``: SGLang bench_serving JSONL and printed blocks (shapes: fixtures.py and
tests/vllm/printed_fixtures.py ``sgl``, python/sglang/bench_serving.py at 0033168f)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from collectors.serving.sglang import bench
from collectors.serving.sglang import layout as sgl_layout
from tests.helpers import query, run_cli
from tests.sglang import fixtures
from tests.sglang.conftest import MODEL
from tests.vllm import printed_fixtures as pf


def test_jsonl_with_tp_attention_ep_moe_layout(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "sglang_1201_64_1024_256.jsonl"
    objs = fixtures.write_jsonl(path, accept=2.4)
    res = run_cli(store_path, "sglang-bench", "--results", str(path), "--model", MODEL,
                  "--server-args", f"python -m sglang.launch_server --model-path {MODEL} --tp 8 "
                  "--ep 8 --moe-a2a-backend deepep", "--sglang-version", "0.5.4", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert res.json["engine"] == "sglang" and res.json["formats"] == ["jsonl"]
    assert res.json["concurrency"] == [1, 4, 16] and res.json["layouts"] == ["TP8+EP"]
    rows = query(store_path, "SELECT source, engine, engine_version, vllm_version, model_id, "
                 "layout_kind, concurrency, mean_e2el_ms, p99_tpot_ms, mean_itl_ms, input_len, "
                 "spec_acceptance_length, request_rate, extra FROM v_serving_bench "
                 "ORDER BY concurrency")  # fmt: skip
    src, engine, version, vllm_v, model, kind, conc, e2el, p99_tpot, itl, in_len, acc, rate, extra = rows[1]
    assert (src, engine, version, vllm_v, model, kind) == (
        f"{path.name}#2", "sglang", "0.5.4", None, MODEL, "tp_ep_dp1")  # fmt: skip
    assert conc == 4 and e2el == pytest.approx(objs[1]["mean_e2e_latency_ms"])
    assert p99_tpot == pytest.approx(objs[1]["p99_tpot_ms"]) and itl == objs[1]["mean_itl_ms"]
    assert in_len == 1024.0 and acc == 2.4 and rate is None
    extra = json.loads(extra)
    assert extra["p95_itl_ms"] == pytest.approx(objs[1]["p95_itl_ms"])
    assert extra["mean_concurrency"] == pytest.approx(3.84)


def test_printed_log_without_concurrency_limit(tmp_path: Path, store_path: Path) -> None:
    c = pf.case(64, tpot=9.75)
    c["concurrency"] = None  # "Max request concurrency: not set": all 64 sent at rate inf
    log = tmp_path / "sglang-bench.log"
    log.write_text("\n".join([pf.namespace(MODEL, None, tool="sglang"), "Namespace(...)",
                              "Starting warmup with 1 sequences...", pf.sgl(c)]))  # fmt: skip
    res = run_cli(store_path, "sglang-bench", "--results", str(log), "--json")
    assert res.code == 0, res.stderr
    row = query(store_path, "SELECT model_id, concurrency, max_concurrency, mean_tpot_ms, "
                "median_e2el_ms, p99_itl_ms, spec_acceptance_length, output_throughput, "
                "result_format, backend FROM v_serving_bench")[0]  # fmt: skip
    assert row[:3] == (MODEL, 64, None) and row[3] is None  # SGLang prints no TPOT section
    assert row[4] == pytest.approx(c["e2el"] - 3.0) and row[5] == pytest.approx(11.75)
    assert row[6] == 2.31 and row[7] == pytest.approx(c["out_tok_s"])
    assert row[8:] == ("printed", "sglang")


def test_dp_attention_layout_is_the_tp_group_split() -> None:
    lay = sgl_layout.from_server_args("--tp 8 --dp 8 --enable-dp-attention --ep 8")
    assert (lay.name, lay.kind, lay.world_size) == ("TP1xDP8+EP", "dp_attn_ep", 8)
    lay = sgl_layout.from_server_args("--tp-size 8 --enable-deepep-moe")
    assert (lay.name, lay.kind) == ("TP8+EP", "tp_ep_dp1")
    lay = sgl_layout.from_server_args("--tp 4 --dp 2")  # two whole TP4 replicas
    assert (lay.name, lay.kind, lay.world_size) == ("TP4xDP2", "tp_dp", 8)
    with pytest.raises(ValueError, match="--tp"):
        sgl_layout.from_server_args("--tp eight")


def test_sweep_needs_sglang_and_uses_its_flags(tmp_path: Path, store_path: Path) -> None:
    res = run_cli(store_path, "sglang-bench", "--url", "http://127.0.0.1:1",
                  "--python", str(tmp_path / "no-python"))  # fmt: skip
    assert res.code == 1 and "sglang.bench_serving` cannot run here" in res.stderr
    args = argparse.Namespace(num_prompts=None, input_len=512, output_len=64, python="py",
                              bench_args="--seed 3")  # fmt: skip
    cmd = " ".join(bench.build_command(args, "http://h:30000", MODEL, 8, tmp_path / "c8.jsonl"))
    for part in ("py -m sglang.bench_serving --backend sglang --base-url http://h:30000",
                 "--max-concurrency 8", "--num-prompts 32", "--random-input-len 512",
                 "--random-output-len 64", "--random-range-ratio 1.0", "--request-rate inf",
                 f"--output-file {tmp_path / 'c8.jsonl'}", "--seed 3"):  # fmt: skip
        assert part in cmd


def test_vllm_and_sglang_imports_of_one_model_sit_side_by_side(tmp_path, store_path) -> None:
    from tests.vllm import bench_fixtures

    bench_fixtures.write_sweep(tmp_path / "v", tp=8, model=MODEL)
    assert run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "v"),
                   "--vllm-version", "0.11.0").code == 0  # fmt: skip
    fixtures.write_jsonl(tmp_path / "s.jsonl")
    assert run_cli(store_path, "sglang-bench", "--results", str(tmp_path / "s.jsonl"),
                   "--model", MODEL, "--server-args", "--tp 8").code == 0  # fmt: skip
    from store.location import resolve
    from store.queries import serving as qs

    runs = qs.bench_runs(resolve(str(store_path)), model=MODEL)
    assert sorted(runs["engines"]) == ["sglang", "vllm 0.11.0"]


# /get_server_info of a DP-attention server: ServerArgs after __post_init__, so the 8192-token
# --chunked-prefill-size reads 1024 per DP rank (python/sglang/srt/server_args.py).
DPA_INFO = {"model_path": MODEL, "tp_size": 8, "dp_size": 8, "ep_size": 8, "pp_size": 1,
            "enable_dp_attention": True, "moe_a2a_backend": "deepep",
            "chunked_prefill_size": 1024, "scheduler_recv_interval": 30,
            "internal_states": [{"avg_spec_accept_length": None}], "version": "0.5.5"}  # fmt: skip


def test_a_result_that_records_its_server_needs_no_server_args(tmp_path: Path,
                                                               store_path: Path) -> None:  # fmt: skip
    """bench_serving since 88342607 writes the server's /get_server_info with each result:
    its layout, version and scheduler facts are read from it; a file without it still needs
    --server-args."""
    path = tmp_path / "sglang.jsonl"
    fixtures.write_jsonl(path, levels=(1, 16), server_info=DPA_INFO)
    res = run_cli(store_path, "sglang-bench", "--results", str(path), "--model", MODEL, "--json")
    assert res.code == 0, res.stderr
    assert res.json["layouts"] == ["TP1xDP8+EP"] and "without a known layout" not in res.stderr
    rows = query(store_path, "SELECT layout_kind, layout_source, engine_version, extra "
                 "FROM v_serving_bench ORDER BY concurrency")  # fmt: skip
    kind, source, version, extra = rows[0]
    assert (kind, source, version) == ("dp_attn_ep", "server_info", "0.5.5")
    extra = json.loads(extra)
    assert {k: extra[k] for k in extra if k.startswith("server_info.")} == {
        "server_info.chunked_prefill_size": 1024, "server_info.dp_size": 8,
        "server_info.enable_dp_attention": True, "server_info.scheduler_recv_interval": 30}
    assert "version" not in extra and "server_info" not in extra
    # --server-args still wins: what the user says was launched
    res = run_cli(store_path, "sglang-bench", "--results", str(path), "--model", MODEL,
                  "--server-args", "--tp 8", "--json")  # fmt: skip
    assert res.code == 0 and res.json["layouts"] == ["TP8"]
    plain = tmp_path / "plain.jsonl"
    fixtures.write_jsonl(plain, levels=(1,))
    res = run_cli(store_path, "sglang-bench", "--results", str(plain), "--model", MODEL, "--json")
    assert res.code == 0 and "without a known layout; pass --server-args" in res.stderr


def test_a_sweep_records_what_the_server_said_where_the_result_does_not(tmp_path: Path) -> None:
    """Older bench_serving writes no server_info: a sweep's rows take the facts it read from
    the same server's /get_server_info; a result's own server_info is never overwritten."""
    from collectors.serving.bench_import import read_rows

    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    fixtures.write_jsonl(old, levels=(4,))
    fixtures.write_jsonl(new, levels=(4,), server_info={**DPA_INFO, "chunked_prefill_size": 512})
    swept = {**DPA_INFO, "scheduler_recv_interval": 10}
    (o,), (n,) = (read_rows([f], None, None, bench.ENGINE, MODEL, server=swept)
                  for f in (old, new))  # fmt: skip
    o_extra, n_extra = json.loads(o["extra"]), json.loads(n["extra"])
    assert (o_extra["server_info.scheduler_recv_interval"], o["engine_version"]) == (10, "0.5.5")
    assert (n_extra["server_info.scheduler_recv_interval"],
            n_extra["server_info.chunked_prefill_size"]) == (30, 512)  # fmt: skip
    assert n["layout_kind"] == "dp_attn_ep" and o["layout_kind"] is None  # the sweep passes its own
