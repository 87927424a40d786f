"""planner.fixture reads a measured-serving CSV in the AIConfigurator silicon-sample format:
which rows it keeps and the benchmark each row ran (written here, no ../shared needed)."""

from __future__ import annotations

import csv
from pathlib import Path

from planner import fixture

COLUMNS = ["id", "silicon_data_source", "backend", "backend_version", "model_path", "system",
           "precision", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size",
           "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
           "silicon_ttft_ms", "silicon_tpot_ms"]  # fmt: skip


def _row(i: int, backend: str, model: str, system: str, tp: int, dp: int, ep: int,
         conc: int = 64, quant: str = "fp8") -> dict:  # fmt: skip
    return {"id": f"r{i}", "silicon_data_source": f"silicon_concurrency={conc}; measured=2026-01-01",
            "backend": backend, "backend_version": "x", "model_path": model, "system": system,
            "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "1024",
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
    GLM-5's rows ran without it. Other engines: 1 (no such flag)."""
    ds, qwen, glm = "deepseek-ai/DeepSeek-R1", "Qwen/Qwen3.5-397B-A17B", "zhipuai/GLM-5"
    rows = [_row(0, "sglang", ds, "b200_sxm", 8, 1, 1, conc=64, quant="fp8_block"),
            _row(1, "sglang", ds, "b200_sxm", 8, 1, 1, conc=8, quant="nvfp4"),
            _row(2, "sglang", ds, "b300_sxm", 4, 1, 1, conc=64, quant="fp8_block"),
            _row(3, "sglang", qwen, "b300_sxm", 4, 1, 1, conc=64, quant="fp8_block"),
            _row(4, "sglang", qwen, "b200_sxm", 4, 1, 1, conc=16, quant="fp8_block"),
            _row(5, "sglang", glm, "b200_sxm", 8, 1, 1, conc=64, quant="fp8_block"),
            _row(6, "vllm", ds, "b200_sxm", 8, 1, 1, conc=64, quant="fp8_block")]  # fmt: skip
    kept, _ = _load(tmp_path, rows)
    assert [fixture.workload_for(r).recv_interval for r in kept] == [30, 10, 10, 10, 30, 1, 1]
