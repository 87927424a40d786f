"""``vllm-bench --results LOG``: printed result blocks of every vLLM era, inside real logs.

Formats per era: tests/vllm/printed_fixtures.py (names the upstream file of each).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.serving import printed
from tests.helpers import query, run_cli
from tests.vllm import printed_fixtures as pf

MODEL = "Qwen/Qwen3-8B"
COLS = ("source, result_format, engine, concurrency, completed, duration_s, request_throughput, "
        "output_throughput, mean_tpot_ms, median_tpot_ms, p99_tpot_ms, p90_itl_ms, mean_e2el_ms, "
        "request_goodput, spec_acceptance_rate, spec_acceptance_length, spec_drafts, "
        "spec_draft_tokens, spec_accepted_tokens, model_id, input_len, output_len, request_rate, "
        "total_token_throughput, failed, max_output_tokens_per_s, extra")  # fmt: skip


def _rows(store: Path) -> list[dict]:
    names = [c.strip() for c in COLS.split(",")]
    return [dict(zip(names, r, strict=True))
            for r in query(store, f"SELECT {COLS} FROM v_serving_bench ORDER BY source")]  # fmt: skip


def test_vllm_bench_serve_slurm_log_with_two_blocks_and_spec_decoding(tmp_path, store_path):
    """`vllm bench serve` (v0.10+) twice in one slurm .out, server log lines around them."""
    c1, c4 = pf.case(1, tpot=18.02), pf.case(4)
    log = tmp_path / "slurm-48213.out"
    log.write_text("\n".join([pf.SERVER_NOISE, pf.namespace(MODEL, 1), pf.v10(c1, spec=False),
                              "INFO 11-30 10:04:40 [loggers.py:127] Engine 000: Avg prompt "
                              "throughput: 0.0 tokens/s", pf.namespace(MODEL, 4), pf.SERVER_NOISE,
                              pf.v10(c4), "srun: job 48213 completed"]))  # fmt: skip
    res = run_cli(store_path, "vllm-bench", "--results", str(log), "--server-args", "-tp 2",
                  "--vllm-version", "0.11.0", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert res.json["results"] == 2 and res.json["concurrency"] == [1, 4]
    assert res.json["formats"] == ["printed"] and res.json["models"] == [MODEL]
    one, four = _rows(store_path)
    assert (one["source"], four["source"]) == ("slurm-48213.out#1", "slurm-48213.out#2")
    assert four["result_format"] == "printed" and four["engine"] == "vllm"
    assert four["concurrency"] == 4 and four["completed"] == 64 and four["failed"] == 0
    assert four["duration_s"] == pytest.approx(c4["duration"])
    assert four["output_throughput"] == pytest.approx(c4["out_tok_s"])
    assert four["total_token_throughput"] == pytest.approx(c4["tot_tok_s"])
    assert four["max_output_tokens_per_s"] == pytest.approx(round(c4["out_tok_s"] * 1.25, 2))
    assert four["mean_tpot_ms"] == pytest.approx(21.54)
    assert four["median_tpot_ms"] == pytest.approx(21.04) and four["p99_tpot_ms"] == 25.54
    assert four["mean_e2el_ms"] == pytest.approx(c4["e2el"])
    assert one["mean_tpot_ms"] == pytest.approx(18.02) and one["spec_acceptance_rate"] is None
    assert (four["spec_acceptance_rate"], four["spec_acceptance_length"]) == (59.97, 2.8)
    assert (four["spec_drafts"], four["spec_draft_tokens"], four["spec_accepted_tokens"]) == (
        1234, 3702, 2220)  # fmt: skip
    extra = json.loads(four["extra"])
    assert extra["spec_decode_position_0_acceptance_pct"] == 78.12
    assert extra["spec_decode_position_2_acceptance_pct"] == 42.38
    assert extra["args_input_len"] == 1024 and extra["args_output_len"] == 256
    assert four["input_len"] == 1024.0 and four["output_len"] == 256.0  # total / completed
    assert four["request_rate"] is None  # inf
    assert four["model_id"] == MODEL
    again = run_cli(store_path, "vllm-bench", "--results", str(log), "--server-args", "-tp 2",
                    "--vllm-version", "0.11.0", "--json")  # fmt: skip
    assert again.code == 0 and again.json["run_id"] == res.json["run_id"]


def test_benchmark_serving_v06_traffic_lines_before_the_block_and_goodput(tmp_path, store_path):
    """benchmark_serving.py v0.6.4-v0.8: concurrency printed above the block; goodput; P90."""
    c = pf.case(16, tpot=30.5)
    log = tmp_path / "bench.txt"
    log.write_text("\n".join([pf.namespace(MODEL, 16), pf.v06(c), ""]))
    res = run_cli(store_path, "vllm-bench", "--results", str(log), "--json")
    assert res.code == 0, res.stderr
    (row,) = _rows(store_path)
    assert row["source"] == "bench.txt" and row["concurrency"] == 16
    assert row["request_goodput"] == pytest.approx(c["goodput"])
    assert row["p90_itl_ms"] == pytest.approx(32.0) and row["mean_tpot_ms"] == 30.5
    assert row["mean_e2el_ms"] == pytest.approx(c["e2el"])
    assert row["total_token_throughput"] == pytest.approx(c["tot_tok_s"])
    assert query(store_path, "SELECT burstiness, max_concurrency FROM serving_bench") == [
        (1.0, 16)]  # fmt: skip


def test_benchmark_serving_v04_block_in_a_ci_log_with_timestamps(tmp_path, store_path):
    """v0.4 (TTFT/TPOT/ITL with Mean, Median, P99; no concurrency) behind CI timestamps."""
    c = pf.case(8, tpot=12.75)
    stamp = "2026-11-30T10:00:0{}.1234567Z "
    body = [pf.namespace(MODEL, None), *pf.v04(c).splitlines()]
    log = tmp_path / "ci-job.log"
    log.write_text("\n".join(stamp.format(i % 10) + line for i, line in enumerate(body)))
    res = run_cli(store_path, "vllm-bench", "--results", str(log), "--json")
    assert res.code == 0, res.stderr
    (row,) = _rows(store_path)
    assert row["mean_tpot_ms"] == 12.75 and row["p99_tpot_ms"] == pytest.approx(13.75)
    assert row["request_throughput"] == pytest.approx(c["req_s"])
    assert row["concurrency"] == 64  # no --max-concurrency, all 64 prompts sent at once (inf)
    assert json.loads(row["extra"])["input_throughput"] == pytest.approx(c["in_tok_s"])


def test_folder_mixes_json_results_and_logs(tmp_path, store_path):
    from tests.vllm import bench_fixtures

    bench_fixtures.write_sweep(tmp_path / "res", levels=(1, 2))
    (tmp_path / "res" / "c32.log").write_text(pf.namespace(MODEL, 32) + "\n" + pf.v10(pf.case(32)))
    (tmp_path / "res" / "server.log").write_text(pf.SERVER_NOISE)  # no block: not a result
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "res"), "--json")
    assert res.code == 0, res.stderr
    assert res.json["formats"] == ["json", "printed"] and res.json["concurrency"] == [1, 2, 32]


def test_log_without_a_block_is_one_clear_line(tmp_path, store_path):
    log = tmp_path / "server.log"
    log.write_text(pf.SERVER_NOISE + "\nTraceback (most recent call last):\n  oops\n")
    res = run_cli(store_path, "vllm-bench", "--results", str(log))
    assert res.code == 1 and "no printed 'Serving Benchmark Result' block" in res.stderr
    assert str(log) in res.stderr and res.stderr.count("\n") == 1 and not store_path.exists()


def test_cut_block_keeps_what_was_printed_and_header_only_is_not_a_result():
    text = "\n".join(pf.v10(pf.case(2)).splitlines()[:9] + ["INFO interleaved log line"])
    (block,) = printed.parse(text)
    assert block.values["request_throughput"] == pf.case(2)["req_s"]
    assert "mean_ttft_ms" not in block.values
    assert printed.parse(pf.HEADER + "\n" + "=" * 50) == []


def test_namespace_values_are_typed():
    args = printed.parse_namespace(pf.namespace("a/b, c", 8))
    assert args["model"] == "a/b, c" and args["max_concurrency"] == 8
    assert args["request_rate"] == float("inf") and args["random_input_len"] == 1024
    assert args["served_model_name"] is None and args["save_result"] is False


def test_vllm_bench_serve_finite_rate_and_failures(tmp_path, store_path):
    c = dict(pf.case(32), failed=3)
    log = tmp_path / "rate4.txt"
    log.write_text(pf.v10(c, spec=False, rate=4.0))
    res = run_cli(store_path, "vllm-bench", "--results", str(log), "--json")
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT request_rate, max_concurrency, concurrency, failed, "
                 "model_id FROM serving_bench") == [(4.0, 32, 32, 3, None)]  # fmt: skip


def test_block_without_args_line_takes_the_model_from_the_command(tmp_path, store_path):
    log = tmp_path / "scrollback.txt"
    log.write_text(pf.v10(pf.case(2), spec=False))
    res = run_cli(store_path, "vllm-bench", "--results", str(log))
    assert res.code == 0 and "1 result(s) name no model; pass --model" in res.stderr
    res = run_cli(store_path, "vllm-bench", "--results", str(log), "--model", MODEL, "--json")
    assert res.code == 0 and res.json["models"] == [MODEL]  # another run: the model is new
    assert query(store_path, "SELECT count(DISTINCT run_id) FROM serving_bench") == [(2,)]
