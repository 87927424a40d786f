"""Every quantization format and attention variant, on the real configs of the fixture."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.cost.serving import ServeLayout, Workload, predict
from planner.cost.step import family
from planner.specs import hardware, models
from tests.helpers import FIXTURES

CONFIGS = FIXTURES / "serving" / "configs"
pytestmark = pytest.mark.skipif(not CONFIGS.is_dir(), reason=f"{CONFIGS} absent")


def load(name: str) -> models.ModelSpec:
    return models.load(CONFIGS / f"{name}_config.json")


@pytest.mark.parametrize(
    ("name", "weights", "expert_bpp", "attention_bpp", "kv"),
    [
        ("moonshotai--Kimi-K2.5", "int4", 0.5 + 2 / 32, 2.0, "bf16"),  # W4A16 compressed-tensors
        ("deepseek-ai--DeepSeek-V3", "fp8_e4m3", 1 + 4 / 128**2, 1 + 4 / 128**2, "bf16"),
        ("openai--gpt-oss-120b", "mxfp4", 0.5 + 1 / 32, 2.0, "bf16"),
        # ModelOpt NVFP4: hf_quant_config.json beside the config, attention excluded, FP8 KV
        ("nvidia--DeepSeek-V3.1-NVFP4", "nvfp4", 0.5625, 2.0, "fp8_e4m3"),
        ("nvidia--Kimi-K2.5-NVFP4", "nvfp4", 0.5625, 2.0, "fp8_e4m3"),  # inline modelopt
        ("meta-llama--Meta-Llama-3.1-70B", "bf16", 2.0, 2.0, "bf16"),
    ],
)
def test_formats_parse_to_bytes_per_parameter(name, weights, expert_bpp, attention_bpp, kv):
    m = load(name)
    assert m.native.weights == weights
    assert m.bpp("experts") == pytest.approx(expert_bpp)
    assert m.bpp("attention") == pytest.approx(attention_bpp)
    assert m.bpp("lm_head") == 2.0
    assert m.native.kv_cache == kv


def test_nested_text_config_and_attention_variants() -> None:
    kimi = load("moonshotai--Kimi-K2.5")  # text_config nested (KimiK25ForConditionalGeneration)
    assert (kimi.attention, kimi.num_experts, kimi.num_layers) == ("mla", 384, 61)
    oss = load("openai--gpt-oss-120b")  # alternating sliding-window layers, attention sinks
    assert (oss.window_layers, oss.sliding_window, oss.attention_sinks) == (18, 128, True)
    qwen = load("Qwen--Qwen3.5-397B-A17B")  # Gated DeltaNet: 3 of 4 layers linear attention
    assert qwen.linear_layers == 45 and qwen.num_layers == 60
    glm = load("zai-org--GLM-5")  # DSA: attention reads the top-2048 tokens
    assert glm.sparse_topk == 2048 and glm.attention == "mla"


def test_windowed_and_sparse_layers_read_less_kv_at_long_context() -> None:
    from planner.cost.params import FITTED

    hw = hardware.preset("b200-sxm-8x")
    lay, w = ServeLayout(tp=8, moe_tp=8), Workload(32768, 2)
    # The kv_cache term also carries each sequence's per-layer cost (seq_us), the same with
    # or without windows: without it, the term is the KV reads alone.
    p = FITTED.with_values(seq_us={e: 0.0 for e in FITTED.seq_us})
    oss = load("openai--gpt-oss-120b")
    dense = replace(oss, window_layers=0)  # as if every layer attended to everything
    kv = predict(oss, hw, lay, w, np.array([8]), p).breakdown_ms["kv_cache"][0]
    kv_full = predict(dense, hw, lay, w, np.array([8]), p).breakdown_ms["kv_cache"][0]
    assert kv_full / kv == pytest.approx(2.0, rel=0.05)  # half the layers read 128 tokens
    glm, hw = load("zai-org--GLM-5"), hardware.preset("b300-sxm-8x")  # BF16 GLM-5: 1.5 TB
    kv = predict(glm, hw, lay, w, np.array([8]), p).breakdown_ms["kv_cache"][0]
    kv_full = predict(replace(glm, sparse_topk=0, index_head_dim=0), hw, lay, w,
                      np.array([8]), p).breakdown_ms["kv_cache"][0]  # fmt: skip
    assert kv < kv_full / 2  # top-2048 of 32k latents plus 128-byte indexer keys


@pytest.mark.parametrize(
    ("name", "host", "tp"),
    [
        ("moonshotai--Kimi-K2.5", "h200-sxm-8x", 8),
        ("deepseek-ai--DeepSeek-V3", "h200-sxm-8x", 8),
        ("openai--gpt-oss-120b", "h100-sxm-8x", 2),
        ("nvidia--DeepSeek-V3.1-NVFP4", "b200-sxm-8x", 4),
        ("nvidia--Kimi-K2.5-NVFP4", "gb300-nvl72-4x", 4),
        ("meta-llama--Meta-Llama-3.1-70B", "a100-sxm-8x", 4),
        ("Qwen--Qwen3-32B-FP8", "l40s-pcie-8x", 2),
        ("nvidia--GLM-5-NVFP4", "b300-sxm-8x", 8),
    ],
)
def test_every_format_predicts(name: str, host: str, tp: int) -> None:
    m, hw = load(name), hardware.preset(host)
    pr = predict(m, hw, ServeLayout(tp=tp, moe_tp=tp), Workload(1024, 1024), np.array([1, 64]))
    assert np.all(np.isfinite(pr.tpot_ms)) and pr.tpot_ms[1] > pr.tpot_ms[0] > 0


def test_fp4_without_fp4_tensor_cores_runs_as_w4a16() -> None:
    """NVFP4 on Hopper has no FP4 tensor cores: prefill computes at the BF16 peak there."""
    m = load("nvidia--DeepSeek-V3.1-NVFP4")
    assert family(m.bpp("experts"), m.native.weights) == "fp4"
    lay, w = ServeLayout(tp=8, moe_tp=8), Workload(8192, 512)
    h200 = predict(m, hardware.preset("h200-sxm-8x"), lay, w, np.array([64]))
    b200 = predict(m, hardware.preset("b200-sxm-8x"), lay, w, np.array([64]))
    ratio = h200.breakdown_ms["prefill"][0] / b200.breakdown_ms["prefill"][0]
    bf16_ratio = 2250 / 989  # what the BF16 (attention) part alone would give
    assert ratio > bf16_ratio * 1.2  # the FP4 GEMMs lose their 9 PF tensor cores on Hopper


@pytest.mark.parametrize(("engine", "threshold"), [("vllm", 256), ("sglang", 1024), ("trtllm", 128)])
def test_shared_expert_floors_hide_behind_routed_experts_up_to_the_engines_threshold(
    engine: str, threshold: int
) -> None:
    """Each engine runs a small batch's shared expert on a second stream beside the routed
    experts: past its token threshold the shared expert's kernel floors come back, in full;
    a model without shared experts has no such step."""
    from planner.cost.params import FITTED, KERNELS
    from planner.cost.step import decode_terms

    hw, lay = hardware.preset("b200-sxm-8x"), ServeLayout(tp=8)
    w = Workload(1024, 1024, engine=engine)
    B = np.array([float(threshold), threshold + 1.0])
    kimi = load("nvidia--Kimi-K2.5-NVFP4")
    mlp = decode_terms(kimi, hw, lay, w, B, FITTED)["mlp"]
    floor_us = FITTED.kernel_us * FITTED.engine_kernel[engine]  # the engine's kernel floor
    floors_ms = kimi.num_moe_layers * KERNELS["dense_mlp"] * floor_us / 1e3
    assert mlp[1] - mlp[0] == pytest.approx(floors_ms, rel=0.05)
    minimax = load("MiniMaxAI--MiniMax-M2.5")
    assert minimax.shared_params == 0
    flat = decode_terms(minimax, hw, lay, w, B, FITTED)["mlp"]
    assert flat[1] - flat[0] < floors_ms / 100


def test_sparse_attention_layers_carry_their_indexer() -> None:
    """GLM-5's DSA indexer (wq_b, wk, weights_proj; replicated on every TP rank) is in its
    attention weights, and its decode kernels are in every layer's attention floor."""
    from dataclasses import replace

    from planner.cost.params import FITTED, KERNELS
    from planner.cost.step import decode_terms

    glm = load("zai-org--GLM-5")
    assert (glm.sparse_topk, glm.index_heads, glm.index_head_dim) == (2048, 32, 128)
    dense = replace(glm, sparse_topk=0)
    rep, shard = glm.attention_params()
    indexer = 2048 * 32 * 128 + 6144 * 128 + 6144 * 32
    assert rep - dense.attention_params()[0] == indexer and shard == dense.attention_params()[1]
    hw, lay, w = hardware.preset("b200-sxm-8x"), ServeLayout(tp=8), Workload(1024, 1024)
    B = np.array([4.0])
    extra = decode_terms(glm, hw, lay, w, B, FITTED)["attention"] - decode_terms(
        dense, hw, lay, w, B, FITTED)["attention"]  # fmt: skip
    floors_ms = glm.num_layers * KERNELS["dsa_indexer"] * FITTED.kernel_us / 1e3
    assert extra[0] == pytest.approx(floors_ms, rel=0.1)
