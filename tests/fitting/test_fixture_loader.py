"""fitting.fixture reads a measured-serving CSV in the AIConfigurator silicon-sample format:
which rows it keeps and the benchmark each row ran (written here, no ../shared needed)."""

from __future__ import annotations

import csv
from pathlib import Path

from fitting import fixture

COLUMNS = ["id", "silicon_data_source", "backend", "backend_version", "model_path", "system",
           "precision", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size",
           "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
           "silicon_ttft_ms", "silicon_tpot_ms"]  # fmt: skip


def _row(i: int, backend: str, model: str, system: str, tp: int, dp: int, ep: int,
         conc: int = 64, quant: str = "fp8", isl: int = 1024, osl: int = 1024,
         measured: str = "2026-01-01T00:00:00.000Z") -> dict:  # fmt: skip
    return {"id": f"r{i}", "silicon_data_source": f"silicon_concurrency={conc}; measured={measured}",
            "backend": backend, "backend_version": "x", "model_path": model, "system": system,
            "precision": "fp8", "mode": "agg", "isl": str(isl), "osl": str(osl),
            "gemm_quant_mode": quant, "moe_quant_mode": quant, "batch_size": str(conc // dp),
            "tp_size": str(tp), "pp_size": "1", "attention_dp_size": str(dp),
            "moe_tp_size": "1", "moe_ep_size": str(ep), "silicon_ttft_ms": "500",
            "silicon_tpot_ms": str(20 + i)}  # fmt: skip


def _load(tmp_path: Path, rows: list[dict]) -> tuple[list[fixture.Row], dict[str, int]]:
    path = tmp_path / "sample.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return fixture.load_rows(path)


def test_hopper_rows_load_and_trtllm_dp_rows_carry_their_scripts_balance(tmp_path: Path) -> None:
    rows = [_row(0, "trtllm", "deepseek-ai/DeepSeek-R1", "h200_sxm", 1, 8, 8),
            _row(1, "trtllm", "openai/gpt-oss-120b", "h200_sxm", 1, 4, 4),
            _row(2, "trtllm", "openai/gpt-oss-120b", "b200_sxm", 1, 4, 4),
            _row(3, "vllm", "openai/gpt-oss-120b", "h100_sxm", 4, 1, 1),
            _row(4, "trtllm", "openai/gpt-oss-120b", "l40s", 4, 1, 1)]  # fmt: skip
    kept, dropped = _load(tmp_path, rows)
    assert [r.id for r in kept] == ["r0", "r1", "r2", "r3"]  # l40s: no such system preset
    assert dropped["out of scope (disagg, > 8 GPUs, no config)"] == 1
    assert [fixture.host_for(r).name for r in kept] == ["h200-sxm-8x"] * 2 + ["b200-sxm-8x", "h100-sxm-8x"]
    # dsr1_fp8_h200_trt.sh: timeout_iters 60; gptoss_fp4_h200_trt.sh: balance off; b200: 50.
    assert [fixture.workload_for(r).adp_balance_iters for r in kept] == [60, 0, 50, 0]


def test_sglang_rows_carry_their_scripts_recv_interval(tmp_path: Path) -> None:
    """InferenceX's SGLang scripts poll every 30 steps from concurrency 16, else every 10
    (dsr1_*, qwen3.5_*); qwen3.5_fp8_b300.sh always 10; the DeepSeek FP8 TP=4 branch 10;
    GLM-5's rows ran without it, and so did every H100 / H200 script (dsr1_fp8_h200.sh,
    qwen3.5_fp8_h200.sh) before 2026-05. Other engines: 1 (no such flag)."""
    ds, qwen, glm = "deepseek-ai/DeepSeek-R1", "Qwen/Qwen3.5-397B-A17B", "zhipuai/GLM-5"
    rows = [_row(0, "sglang", ds, "b200_sxm", 8, 1, 1, conc=64, quant="fp8_block"),
            _row(1, "sglang", ds, "b200_sxm", 8, 1, 1, conc=8, quant="nvfp4"),
            _row(2, "sglang", ds, "b300_sxm", 4, 1, 1, conc=64, quant="fp8_block"),
            _row(3, "sglang", qwen, "b300_sxm", 4, 1, 1, conc=64, quant="fp8_block"),
            _row(4, "sglang", qwen, "b200_sxm", 4, 1, 1, conc=16, quant="fp8_block"),
            _row(5, "sglang", glm, "b200_sxm", 8, 1, 1, conc=64, quant="fp8_block"),
            _row(6, "vllm", ds, "b200_sxm", 8, 1, 1, conc=64, quant="fp8_block"),
            _row(7, "sglang", ds, "h200_sxm", 8, 1, 1, conc=64, quant="fp8_block"),
            _row(8, "sglang", qwen, "h200_sxm", 8, 1, 1, conc=8, quant="fp8_block")]  # fmt: skip
    kept, _ = _load(tmp_path, rows)
    assert [fixture.workload_for(r).recv_interval for r in kept] == [30, 10, 10, 10, 30, 1, 1,
                                                                     1, 1]  # fmt: skip


def test_trtllm_rows_carry_their_scripts_token_budget_and_batch_waiting(tmp_path: Path) -> None:
    """InferenceX's TensorRT-LLM scripts as they stood at each row's date: Llama-3.1-70B
    --max_num_tokens 16384, batch waiting (20 steps, 0.9) at 1k/1k below TP=8; gpt-oss 20000;
    DeepSeek-R1 (C + I + 127) rounded down to 64, at least 8192 from 2026-01-21, and FP8's
    DELAY_BATCHING (40 steps, 0.8) at 1k/1k from C = 64 from 2026-01-29; the H200 scripts the
    same without DELAY_BATCHING; other engines, other GPUs and rows without a date keep the
    defaults."""
    llama, oss, ds = "meta-llama/Llama-3.1-70B", "openai/gpt-oss-120b", "deepseek-ai/DeepSeek-R1"
    rows = [_row(0, "trtllm", llama, "b200_sxm", 2, 1, 1, conc=4),
            _row(1, "trtllm", llama, "b200_sxm", 8, 1, 1, conc=4),
            _row(2, "trtllm", llama, "b200_sxm", 2, 1, 1, conc=4, isl=1024, osl=8192),
            _row(3, "trtllm", oss, "b200_sxm", 1, 1, 1, conc=4, quant="nvfp4"),
            _row(4, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=4, measured="2025-11-02T00:00:00Z"),
            _row(5, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=64, measured="2026-01-29T15:27:29Z"),
            _row(6, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=64, quant="nvfp4",
                 measured="2026-02-05T00:00:00Z"),
            _row(7, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=32, measured="undated"),
            _row(8, "vllm", ds, "b200_sxm", 8, 1, 1, conc=64),
            _row(9, "trtllm", ds, "h200_sxm", 8, 1, 1, conc=64, measured="2026-01-29T15:27:29Z"),
            _row(10, "trtllm", oss, "h200_sxm", 1, 1, 1, conc=4, quant="nvfp4"),
            _row(11, "trtllm", llama, "h200_sxm", 2, 1, 1, conc=4),
            _row(12, "trtllm", oss, "b300_sxm", 1, 1, 1, conc=4, quant="nvfp4")]  # fmt: skip
    kept, _ = _load(tmp_path, rows)
    assert [r.measured for r in kept][4:7] == ["2025-11-02", "2026-01-29", "2026-02-05"]
    got = [(w.token_budget, w.batch_wait_iters, w.batch_wait_ratio)
           for w in map(fixture.workload_for, kept)]  # fmt: skip
    assert got == [(16384, 20, 0.9), (16384, 0, 0.0), (16384, 0, 0.0), (20000, 0, 0.0),
                   (1152, 0, 0.0), (8192, 40, 0.8), (8192, 0, 0.0), (0, 0, 0.0),
                   (0, 0, 0.0), (8192, 0, 0.0), (20000, 0, 0.0), (16384, 20, 0.9),
                   (0, 0, 0.0)]  # fmt: skip


def test_concurrency_is_the_instances_when_the_client_spread_over_replicas(tmp_path: Path) -> None:
    """batch_size x attention-DP is one instance's concurrency; a client concurrency k times it
    ran k replicas behind a router (the sample's Qwen3-32B-NVFP4: 416 = 32 x 13)."""
    qwen, mm = "nvidia/Qwen3-32B-NVFP4", "MiniMaxAI/MiniMax-M2.5"
    replicas = _row(0, "trtllm", qwen, "b200_sxm", 2, 1, 1, conc=416, quant="nvfp4") | {"batch_size": "13"}
    # vLLM TP+EP encoded as attention-DP (rule 2): batch_size = conc / 2, one instance
    tp_ep = _row(1, "vllm", mm, "b200_sxm", 2, 2, 4, conc=512)
    odd = _row(2, "trtllm", qwen, "b200_sxm", 2, 1, 1, conc=100, quant="nvfp4") | {"batch_size": "13"}
    unsaid = _row(3, "trtllm", qwen, "b200_sxm", 2, 1, 1, conc=8, quant="nvfp4") | {
        "silicon_data_source": "measured=2026-03-07"}
    kept, _ = _load(tmp_path, [replicas, tp_ep, odd, unsaid])
    assert [(r.id, r.concurrency) for r in kept] == [("r0", 13), ("r1", 512), ("r2", 100), ("r3", 8)]
    assert kept[1].layout.dp == 1 and kept[1].layout.moe_ep == 2


def test_one_run_listed_under_two_model_names_counts_once(tmp_path: Path) -> None:
    """The sample lists some DeepSeek-R1 runs again as DeepSeek-V3 (same shapes): same point,
    same TPOT and TTFT. Counted once, under the first name; a V3 run of its own stays."""
    r1, v3 = "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"
    same = [_row(0, "sglang", r1, "b200_sxm", 8, 1, 1), _row(0, "sglang", v3, "b200_sxm", 8, 1, 1)]
    same[1]["id"] = "r0-as-v3"
    own = _row(1, "sglang", v3, "b200_sxm", 8, 1, 1, conc=32)
    # same point and TPOT under the other name but another TTFT: another run
    other_ttft = _row(0, "sglang", r1, "b200_sxm", 8, 1, 1, conc=32) | {
        "id": "r2", "silicon_tpot_ms": own["silicon_tpot_ms"], "silicon_ttft_ms": "510"}
    kept, dropped = _load(tmp_path, [*same, own, other_ttft])
    assert [r.id for r in kept] == ["r0", "r1", "r2"]
    assert dropped["one run under two model names"] == 1


def test_a_trtllm_deepseek_v3_run_is_the_repeat_that_exposes_an_mtp_run(tmp_path: Path) -> None:
    """TRT-LLM DeepSeek-R1 rows that step about 2x faster than DeepSeek-V3 (same shapes) at
    the same point are MTP runs (rule 4 keeps the slowest); other engines keep both."""
    r1, v3 = "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"
    rows = [_row(0, "trtllm", r1, "b200_sxm", 8, 1, 1, conc=16) | {"silicon_tpot_ms": "11.2"},
            _row(1, "trtllm", v3, "b200_sxm", 8, 1, 1, conc=16) | {"silicon_tpot_ms": "21.6"},
            _row(2, "sglang", r1, "b200_sxm", 8, 1, 1, conc=16) | {"silicon_tpot_ms": "11.2"},
            _row(3, "sglang", v3, "b200_sxm", 8, 1, 1, conc=16) | {"silicon_tpot_ms": "16.0"}]  # fmt: skip
    kept, dropped = _load(tmp_path, rows)
    assert [r.id for r in kept] == ["r1", "r2", "r3"]
    assert dropped["TRT-LLM DeepSeek-R1 MTP repeats"] == 1


def test_a_copy_rounded_to_hundredths_counts_once_and_the_dated_one_stays(tmp_path: Path) -> None:
    """A gap-analysis file restates runs as 8.07 / 231.85 ms without their date: one run. The
    dated full-precision copy is kept, whichever comes first; a repeat 0.02 ms apart stays."""
    qwen = "Qwen/Qwen3.5-397B-A17B"
    copy = _row(0, "sglang", qwen, "b200_sxm", 8, 1, 1, conc=4, quant="") | {
        "silicon_data_source": "source_file=gap-analysis.csv; silicon_concurrency=4",
        "silicon_tpot_ms": "8.07", "silicon_ttft_ms": "231.85"}
    dated = _row(1, "sglang", qwen, "b200_sxm", 8, 1, 1, conc=4, quant="") | {
        "silicon_tpot_ms": "8.065206402314423", "silicon_ttft_ms": "231.8478822184261"}
    repeat = _row(2, "sglang", qwen, "b200_sxm", 8, 1, 1, conc=4, quant="") | {
        "silicon_tpot_ms": "8.09", "silicon_ttft_ms": "231.85"}
    kept, dropped = _load(tmp_path, [copy, dated, repeat])
    assert sorted(r.id for r in kept) == ["r1", "r2"]
    assert next(r for r in kept if r.id == "r1").measured == "2026-01-01"
    assert dropped["copies rounded to 0.01 ms"] == 1


def test_vllm_rows_carry_their_scripts_kv_dtype_and_token_budget(tmp_path: Path) -> None:
    """InferenceX's vLLM scripts at each row's date: Llama-3.1-70B FP8 KV always; gpt-oss FP8
    KV from 2025-12-03; MiniMax-M2.5 FP8 KV from 2026-03-27 (NVFP4: 04-02) and
    --max-num-batched-tokens 2 x ISL from 2026-04-03 (NVFP4: 04-07); Kimi-K2.5 NVFP4 on B200
    2 x ISL from 2026-04-16. Other rows and engines: the checkpoint's KV, the default budget."""
    llama, oss, mm, kimi = ("meta-llama/Llama-3.1-70B", "openai/gpt-oss-120b",
                            "MiniMaxAI/MiniMax-M2.5", "moonshotai/Kimi-K2.5")  # fmt: skip
    rows = [_row(0, "vllm", llama, "b200_sxm", 2, 1, 1, measured="2025-10-02T00:00:00Z"),
            _row(1, "vllm", oss, "b200_sxm", 1, 1, 1, quant="nvfp4", measured="2025-11-02T00:00:00Z"),
            _row(2, "vllm", oss, "b200_sxm", 1, 1, 1, quant="nvfp4", measured="2026-02-05T00:00:00Z"),
            _row(3, "vllm", mm, "b200_sxm", 4, 1, 1, measured="2026-03-20T00:00:00Z"),
            _row(4, "vllm", mm, "b200_sxm", 4, 1, 1, measured="2026-03-30T00:00:00Z"),
            _row(5, "vllm", mm, "b200_sxm", 4, 1, 1, isl=8192, measured="2026-04-10T00:00:00Z"),
            _row(6, "vllm", mm, "b200_sxm", 4, 1, 1, quant="nvfp4", measured="2026-04-05T00:00:00Z"),
            _row(7, "vllm", kimi, "b200_sxm", 4, 1, 1, quant="nvfp4", measured="2026-04-20T00:00:00Z"),
            _row(8, "vllm", kimi, "b300_sxm", 4, 1, 1, quant="nvfp4", measured="2026-04-20T00:00:00Z"),
            _row(9, "vllm", kimi, "b200_sxm", 4, 1, 1, quant="int4_wo", measured="2026-04-20T00:00:00Z"),
            _row(10, "sglang", mm, "b200_sxm", 4, 1, 1, measured="2026-04-10T00:00:00Z")]  # fmt: skip
    kept, _ = _load(tmp_path, rows)
    got = [(w.kv_dtype, w.token_budget) for w in map(fixture.workload_for, kept)]
    fp8 = "fp8_e4m3"
    assert got == [(fp8, 0), ("", 0), (fp8, 0), ("", 0), (fp8, 0), (fp8, 16384), (fp8, 0),
                   ("", 2048), ("", 0), ("", 0), ("", 0)]  # fmt: skip


def test_runs_of_inferencex_mtp_configs_are_dropped(tmp_path: Path) -> None:
    """The runs a commit to InferenceX's MTP configs triggered (fitting.fixture_mtp): all of a
    run that swept only MTP configs; of a run that swept the non-MTP config too, the points
    only the MTP config swept and, where both did, the faster run (under either DeepSeek
    name). Other days, models and engines stay."""
    ds, v3, qwen, glm = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3",
                         "Qwen/Qwen3.5-397B-A17B", "zhipuai/GLM-5")  # fmt: skip
    day = "{}T17:21:58Z".format
    rows = [_row(0, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=8, quant="nvfp4", measured=day("2026-02-06")),
            _row(1, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=8, quant="nvfp4", measured=day("2026-02-03")),
            _row(2, "trtllm", ds, "b200_sxm", 8, 1, 1, conc=4, quant="fp8", measured=day("2026-02-05")),
            _row(3, "sglang", qwen, "b200_sxm", 4, 1, 1, conc=4, quant="fp8_block", measured=day("2026-03-20")),
            _row(4, "sglang", glm, "b200_sxm", 8, 1, 1, conc=4, quant="fp8_block", measured=day("2026-03-20")),
            _row(5, "sglang", ds, "b200_sxm", 8, 1, 1, conc=4, quant="fp8_block", measured=day("2026-03-25")),
            _row(6, "sglang", v3, "b200_sxm", 8, 1, 1, conc=4, quant="fp8_block", measured=day("2026-03-25")),
            _row(7, "sglang", ds, "b200_sxm", 8, 1, 1, conc=128, quant="fp8_block", measured=day("2026-03-25")),
            _row(8, "sglang", ds, "b200_sxm", 4, 1, 1, conc=8, quant="fp8_block", isl=8192, measured=day("2026-03-25")),
            _row(9, "sglang", ds, "b200_sxm", 8, 1, 1, conc=8, quant="fp8_block", isl=8192, measured=day("2026-03-25")),
            _row(10, "vllm", ds, "b200_sxm", 8, 1, 1, conc=4, quant="fp8_block", measured=day("2026-02-06")),
            _row(11, "sglang", qwen, "b200_sxm", 4, 1, 1, conc=4, quant="fp8_block", measured="")]  # fmt: skip
    rows[5]["silicon_tpot_ms"], rows[6]["silicon_tpot_ms"] = "6.70", "8.76"  # MTP, non-MTP
    rows[3]["silicon_tpot_ms"], rows[11]["silicon_tpot_ms"] = "6.3317", "6.33"  # undated copy
    rows[11]["silicon_data_source"] = "source_file=gap_analysis.csv"
    kept, dropped = _load(tmp_path, rows)
    assert sorted(r.id for r in kept) == ["r1", "r10", "r4", "r6", "r8"]
    assert dropped["runs of InferenceX MTP configs"] == 7
