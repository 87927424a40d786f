"""Reading which GEMMs a quantized checkpoint keeps in the model dtype (planner.specs.quant_ignore)."""

from __future__ import annotations

import pytest

from planner.specs import models
from planner.specs.quant_ignore import unquantized
from tests.helpers import FIXTURES

CONFIGS = FIXTURES / "serving" / "configs"


@pytest.mark.parametrize(
    ("ignore", "dense_layers", "kept"),
    [
        # zai-org/GLM-5-FP8 (HF FP8): norms, indexer scores and router gates only
        (["lm_head", "model.embed_tokens", "model.layers.0.input_layernorm",
          "model.layers.0.self_attn.indexer.k_norm.bias", "model.layers.0.self_attn.indexers_proj",
          "model.layers.0.self_attn.kv_a_layernorm", "model.layers.3.mlp.gate",
          "model.layers.3.mlp.gate.e_score_correction_bias"], 3, set()),
        # nvidia/Kimi-K2.6-NVFP4 (ModelOpt globs): attention, shared experts, the dense layer
        (["language_model.lm_head", "language_model.model.layers.0*",
          "language_model.model.layers.1.mlp.shared_experts*",
          "language_model.model.layers.1.self_attn*", "vision_tower*"], 1,
         {"attention", "shared", "dense_mlp"}),
        # nvidia/GLM-5-NVFP4: attention projections named one by one, the indexer apart
        (["model.layers.3.self_attn.o_proj", "model.layers.3.self_attn.indexer*",
          "model.layers.78*"], 3, {"attention"}),
        # moonshotai/Kimi-K2.5 (compressed-tensors regexes)
        (["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
          "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"], 1, {"attention", "shared", "dense_mlp"}),
        # openai/gpt-oss-120b: attention whole, the router is no dense MLP
        (["model.layers.*.self_attn", "model.layers.*.mlp.router", "lm_head"], 0, {"attention"}),
        # some dense layers only: the others still run quantized
        (["model.layers.0*"], 3, set()),
    ],
)  # fmt: skip
def test_ignore_lists_as_checkpoints_ship_them(ignore, dense_layers, kept) -> None:
    assert unquantized(ignore, dense_layers) == kept


@pytest.mark.skipif(not CONFIGS.is_dir(), reason=f"{CONFIGS} absent")
def test_glm5_fp8_runs_its_attention_in_fp8() -> None:
    fp8 = models.load(CONFIGS / "zai-org--GLM-5-FP8_config.json")
    bf16 = models.load(CONFIGS / "zai-org--GLM-5_config.json")
    assert fp8.bpp("attention") == pytest.approx(1.0, abs=0.01)
    assert fp8.bpp("dense_mlp") == pytest.approx(1.0, abs=0.01)
    embeddings = 2 * bf16.embed_params * 2.0  # embed_tokens and lm_head stay BF16
    assert fp8.nonexpert_bytes() - embeddings == pytest.approx(
        (bf16.nonexpert_bytes() - embeddings) / 2, rel=0.01)  # fmt: skip
