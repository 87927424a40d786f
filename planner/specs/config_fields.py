"""The fields of a Hugging Face ``config.json`` (and ModelOpt's ``hf_quant_config.json``) the
planner reads: what a collector keeps of a model's config, never the raw file.

A file found in a model folder is the folder owner's text; storing it whole would ship
whatever else it holds (a stray credential, a path) to every reader of the store and every
``export``. ``models.from_config`` and ``native.from_hf_config`` read only these keys, so the
kept config gives the same ModelSpec as the file (tests/planner/test_models.py checks it on
every fixture config).
"""

from __future__ import annotations

from typing import Any

# models.from_config: the shape, its aliases across architectures, and what names the model
MODEL_KEYS = frozenset({
    "model_type", "architectures", "torch_dtype", "dtype",
    "hidden_size", "d_model", "num_hidden_layers", "n_layer", "num_layers",
    "num_attention_heads", "n_head", "vocab_size", "num_key_value_heads", "head_dim",
    "n_routed_experts", "num_local_experts", "num_experts", "num_experts_per_tok", "moe_topk",
    "top_k", "intermediate_size", "ffn_dim", "moe_intermediate_size", "mlp_intermediate_size",
    "first_k_dense_replace", "mlp_only_layers", "n_shared_experts",
    "shared_expert_intermediate_size", "shared_intermediate_size",
    "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    "layer_types", "sliding_window", "index_topk", "index_head_dim", "index_n_heads",
    "max_position_embeddings",
})  # fmt: skip
# native.from_hf_config and models._component_bytes: the quantization scheme and its ignore list
QUANT_KEYS = frozenset({
    "quant_method", "fmt", "weight_block_size", "kv_cache_scheme", "bits", "w_bit",
    "quant_algo", "kv_cache_quant_algo", "load_in_4bit", "config_groups", "ignore",
    "modules_to_not_convert", "exclude_modules",
})  # fmt: skip
_GROUP_KEYS = frozenset({"weights", "input_activations"})
_SCHEME_KEYS = frozenset({"num_bits", "type", "group_size", "strategy"})


def _only(obj: Any, keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k in keys} if isinstance(obj, dict) else {}


def _quant(q: Any) -> dict[str, Any] | None:
    if not isinstance(q, dict):
        return None
    out = _only(q, QUANT_KEYS)
    if isinstance(out.get("kv_cache_scheme"), dict):
        out["kv_cache_scheme"] = _only(out["kv_cache_scheme"], _SCHEME_KEYS)
    if isinstance(out.get("config_groups"), dict):
        out["config_groups"] = {
            str(name): {k: _only(v, _SCHEME_KEYS) for k, v in _only(group, _GROUP_KEYS).items()}
            for name, group in out["config_groups"].items()
        }
    return out


def planner_fields(config: Any) -> dict[str, Any]:
    """The keys of a config.json the planner reads (``text_config`` and
    ``quantization_config`` kept the same way); {} for what is not a JSON object."""
    out = _only(config, MODEL_KEYS)
    if isinstance(config, dict):
        if isinstance(config.get("text_config"), dict):
            out["text_config"] = planner_fields(config["text_config"])
        if (q := _quant(config.get("quantization_config"))) is not None:
            out["quantization_config"] = q
    return out


def quant_fields(hf_quant: Any) -> dict[str, Any]:
    """ModelOpt's ``hf_quant_config.json`` as ``models.with_modelopt`` reads it."""
    q = _quant(hf_quant.get("quantization")) if isinstance(hf_quant, dict) else None
    return {"quantization": q} if q is not None else {}
