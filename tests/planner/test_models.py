"""Model specs from HF config.json: presets (REFERENCE §4), real-file parsing, bad configs."""

from __future__ import annotations

import json

import pytest

from planner.errors import PlannerInputError
from planner.specs import models


def test_kimi_preset_shapes_and_derived_sizes() -> None:
    m = models.preset("kimi-k2.5")
    assert (m.num_layers, m.num_dense_layers, m.num_moe_layers) == (61, 1, 60)
    assert (m.hidden, m.num_experts, m.top_k, m.num_shared_experts) == (7168, 384, 8, 1)
    assert (m.expert_intermediate, m.dense_intermediate, m.vocab) == (2048, 18432, 163840)
    assert (m.attention, m.num_heads, m.kv_lora_rank, m.q_lora_rank) == ("mla", 64, 512, 1536)
    assert (m.native.weights, m.native.activations, m.native.kv_cache) == ("int4", "bf16", "bf16")
    assert m.native.get("dispatch") == "bf16"  # W4A16: BF16 dispatch
    # REFERENCE §4: MLA KV 68.6 KiB/token, routed INT4 experts ~571 GB; §2: ~23 GB BF16 rest.
    assert m.kv_bytes_per_token("bf16") / 1024 == pytest.approx(68.6, abs=0.05)
    assert m.routed_expert_bytes() / 1e9 == pytest.approx(571, abs=1)
    assert m.nonexpert_bytes() / 1e9 == pytest.approx(23, abs=0.5)
    assert dict(m.bytes_per_param)["attention"] == 2.0  # attention ships BF16 in Kimi


def test_deepseek_and_minimax_presets() -> None:
    d = models.preset("deepseek-v3")
    assert (d.num_dense_layers, d.num_experts, d.num_heads, d.vocab) == (3, 256, 128, 129280)
    assert d.native.weights == "fp8_e4m3" and d.native.get("dispatch") == "fp8_e4m3"
    assert d.native.communication == "bf16"  # AllReduce stays in the activation dtype
    mm = models.preset("minimax-m2.5")
    assert (mm.num_layers, mm.num_dense_layers, mm.hidden) == (62, 0, 3072)
    assert (mm.attention, mm.num_heads, mm.num_kv_heads, mm.head_dim) == ("gqa", 48, 8, 128)
    assert (mm.num_experts, mm.top_k, mm.num_shared_experts, mm.expert_intermediate) == (
        256, 8, 0, 1536)  # fmt: skip
    assert mm.vocab == 200064
    # GQA KV shards over TP up to the KV-head count, then replicates.
    assert mm.kv_bytes_per_token("bf16", 8) == 62 * 2 * 1 * 128 * 2
    assert mm.kv_bytes_per_token("bf16", 16) == mm.kv_bytes_per_token("bf16", 8)


def test_config_file_round_trip(tmp_path) -> None:
    cfg = tmp_path / "Kimi-K2.5" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(models.MODEL_PRESETS["kimi-k2.5"]))
    m = models.load(cfg.parent)  # a directory holding config.json works too
    assert m.name == "Kimi-K2.5" and m.source == str(cfg)
    assert m.routed_expert_bytes() == models.preset("kimi-k2.5").routed_expert_bytes()
    assert models.resolve(str(cfg)).num_experts == 384


def test_dense_model_config(tmp_path) -> None:
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "vocab_size": 128256, "torch_dtype": "bfloat16"}  # fmt: skip
    m = models.from_config(cfg, name="llama")
    assert (m.num_experts, m.num_moe_layers, m.num_dense_layers) == (0, 0, 32)
    assert m.native.weights == "bf16" and m.head_dim == 128


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a transformer config"),
        ('{"model_type": "x", "num_hidden_layers": 2}', "missing hidden_size"),
        ('{"architectures": ["ResNet"], "hidden_sizes": [64]}', "not a transformer config"),
        ('{"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, '
         '"vocab_size": 10, "quantization_config": {"quant_method": "zzq"}}',
         "unknown quantization method 'zzq'"),
        ('{"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, '
         '"vocab_size": 10, "num_local_experts": 4, "num_experts_per_tok": 9}',
         "num_experts_per_tok 9 not in 1..4"),
        ('{"hidden_size": "big", "num_hidden_layers": 2, "num_attention_heads": 2, '
         '"vocab_size": 10}', "hidden_size must be a non-negative integer"),
    ],
)  # fmt: skip
def test_bad_configs_get_one_line_messages(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(PlannerInputError) as err:
        models.load(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(path) in str(err.value)


def test_unknown_model_name_and_missing_file() -> None:
    with pytest.raises(PlannerInputError, match="neither a model preset"):
        models.resolve("no-such-model")
    with pytest.raises(PlannerInputError, match="cannot read"):
        models.load("/nonexistent/config.json")


def test_models_recorded_in_run_arguments() -> None:
    shape = {"name": "kimi-k2.5", "layers": 2, "hidden": 448, "experts": 24, "top_k": 8,
             "shared_experts": 1, "expert_inter": 128, "attention": "mla", "q_heads": 4,
             "kv_heads": 1, "head_dim": 0, "q_lora": 96, "kv_lora": 32, "rope_dim": 8,
             "nope_dim": 8, "v_dim": 8, "vocab": 10240}  # fmt: skip
    m = models.from_run_metadata(shape, "profile run p1 args")
    assert (m.num_layers, m.hidden, m.num_experts, m.attention, m.kv_lora_rank) == (
        2, 448, 24, "mla", 32)  # fmt: skip
    assert m.source == "profile run p1 args"
    served = models.from_run_metadata("moonshotai/Kimi-K2.5", "vllm-profile run v1")
    assert served.num_experts == 384 and "preset kimi-k2.5" in served.source
    with pytest.raises(PlannerInputError, match="matches no preset"):
        models.from_run_metadata("org/Unknown-7B", "run z")
