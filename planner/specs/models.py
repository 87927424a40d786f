"""Model specs: the shapes the decode-step cost model needs, from an HF ``config.json``.

Handles DeepSeek-V3 / Kimi-K2 (MLA, leading dense layers, shared experts; Kimi-K2.5 nests
them in ``text_config``), MiniMax-M2 / Mixtral / Qwen-MoE (GQA) and dense models. The
checkpoint's native precision comes from ``quantization_config`` via ``planner.specs.native``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from planner.errors import PlannerInputError
from planner.specs.native import NativeError, from_hf_config
from planner.specs.precision import Precision
from planner.specs.quant_ignore import unquantized

# Bytes per stored parameter, scales included (int4 group 32 with a bf16 scale: 0.5 + 2/32).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
    "nvfp4": 0.5625, "mxfp4": 0.53125, "int4": 0.5, "int6": 0.75, "fp6": 0.75, "int3": 0.375,
}  # fmt: skip
COMPONENTS = ("attention", "dense_mlp", "shared", "experts", "lm_head")


def dtype_bytes(dtype: str) -> float:
    return DTYPE_BYTES.get(dtype, 2.0)


@dataclass(frozen=True)
class ModelSpec:
    """One model's decode-relevant shapes and its checkpoint's native precision."""

    name: str
    architecture: str
    num_layers: int
    num_dense_layers: int  # dense-MLP layers (leading, DeepSeek's first_k_dense_replace)
    hidden: int
    vocab: int
    num_experts: int  # routed experts (0 = dense model)
    top_k: int
    num_shared_experts: int
    expert_intermediate: int
    shared_intermediate: int  # total over the shared experts of one layer
    dense_intermediate: int
    attention: str  # "mla" | "gqa"
    num_heads: int
    num_kv_heads: int
    head_dim: int
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    qk_nope_dim: int = 0
    v_head_dim: int = 0
    native: Precision = field(default_factory=lambda: Precision("bf16", "bf16", "bf16", "bf16"))
    # Bytes per parameter of each component as shipped (only some modules are quantized).
    bytes_per_param: tuple[tuple[str, float], ...] = ()
    source: str = ""
    # Layers whose KV cache stops growing: sliding-window (gpt-oss) and linear-attention
    # (Qwen3.5 Gated DeltaNet) layers; sparse attention (DeepSeek DSA / GLM-5) reads top-k.
    sliding_window: int = 0
    window_layers: int = 0
    linear_layers: int = 0
    sparse_topk: int = 0
    index_head_dim: int = 0
    index_heads: int = 0
    attention_sinks: bool = False
    max_context: int = 0  # max_position_embeddings (0 = unknown)

    # ---- derived sizes -------------------------------------------------------------
    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.num_experts else 0

    def bpp(self, component: str) -> float:
        return dict(self.bytes_per_param).get(component, dtype_bytes(self.native.activations))

    @property
    def act_bytes(self) -> float:
        return dtype_bytes(self.native.activations)

    def attention_params(self) -> tuple[int, int]:
        """(replicated, TP-sharded) parameters of one attention layer.

        MLA's q_a / kv_a down-projections are replicated on every TP rank in vLLM, and so is a
        sparse-attention (DSA) layer's indexer (``ReplicatedLinear`` in SGLang's
        python/sglang/srt/layers/attention/nsa/nsa_indexer.py ``Indexer``).
        """
        h = self.hidden
        if self.attention == "mla":
            qk = self.qk_nope_dim + self.qk_rope_dim
            q = (
                h * self.q_lora_rank + self.q_lora_rank * self.num_heads * qk
                if self.q_lora_rank
                else h * self.num_heads * qk
            )
            rep = h * (self.kv_lora_rank + self.qk_rope_dim) + (h * self.q_lora_rank)
            if self.sparse_topk:  # DSA indexer: wq_b, wk, weights_proj, replicated
                rep += (self.q_lora_rank * self.index_heads + h) * self.index_head_dim
                rep += h * self.index_heads
            shard = q - h * self.q_lora_rank
            shard += self.kv_lora_rank * self.num_heads * (self.qk_nope_dim + self.v_head_dim)
            shard += self.num_heads * self.v_head_dim * h
            return rep, shard
        qkv = h * (self.num_heads + 2 * self.num_kv_heads) * self.head_dim
        return 0, qkv + self.num_heads * self.head_dim * h

    @property
    def expert_params(self) -> int:
        return 3 * self.hidden * self.expert_intermediate

    @property
    def shared_params(self) -> int:
        return 3 * self.hidden * self.shared_intermediate

    @property
    def dense_params(self) -> int:
        return 3 * self.hidden * self.dense_intermediate

    @property
    def embed_params(self) -> int:
        return self.vocab * self.hidden

    def expert_bytes(self) -> float:
        return self.expert_params * self.bpp("experts")

    def nonexpert_bytes(self) -> float:
        """Everything but the routed experts: what attention-DP replicates on every GPU."""
        rep, shard = self.attention_params()
        return (
            self.num_layers * (rep + shard) * self.bpp("attention")
            + self.num_dense_layers * self.dense_params * self.bpp("dense_mlp")
            + self.num_moe_layers * self.shared_params * self.bpp("shared")
            + 2 * self.embed_params * self.bpp("lm_head")
        )

    def routed_expert_bytes(self) -> float:
        return self.num_moe_layers * self.num_experts * self.expert_bytes()

    def kv_bytes_per_token(self, kv_dtype: str, tp: int = 1) -> float:
        """KV cache bytes per token per GPU (MLA latent cache is replicated across TP)."""
        b = dtype_bytes(kv_dtype)
        if self.attention == "mla":
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_dim) * b
        heads = max(1.0, self.num_kv_heads / max(tp, 1))
        return self.num_layers * 2 * heads * self.head_dim * b

    def attention_flops_per_token(self, context: float, prefill: bool = False) -> float:
        """Attention FLOPs (QK and PV) per token over all heads and layers at ``context``.

        Full layers attend to the context (DSA sparse layers to at most their top-k),
        sliding-window layers to at most the window; linear-attention layers carry a fixed
        state (not counted). MLA decodes in the absorbed form (scores over the 512-wide
        latent + rope) and prefills in the MHA form over up-projected K/V (qk = nope + rope,
        v), as vLLM's MLA backends do (vllm/v1/attention/backends/mla/common.py: "compute-
        friendly" prefill, "data-movement friendly" decode); SGLang and TRT-LLM do the same.
        """
        if self.attention == "mla" and prefill:
            per_ctx = 2 * (self.qk_nope_dim + self.qk_rope_dim + self.v_head_dim)
        elif self.attention == "mla":
            per_ctx = 2 * (2 * self.kv_lora_rank + self.qk_rope_dim)
        else:
            per_ctx = 4 * self.head_dim
        full = self.num_layers - self.window_layers - self.linear_layers
        ctx = np.asarray(context, dtype=float)
        seen = full * np.minimum(ctx, self.sparse_topk or np.inf)
        seen = seen + self.window_layers * np.minimum(ctx, self.sliding_window or np.inf)
        return self.num_heads * per_ctx * seen


# ---------------------------------------------------------------------------------------
def _int(cfg: dict[str, Any], *keys: str, default: int | None = None, where: str) -> int:
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise PlannerInputError(f"{where}: {key} must be a non-negative integer, got {value!r}")
        return int(value)
    if default is None:
        raise PlannerInputError(
            f"{where}: not a transformer config.json (missing {' / '.join(keys)})"
        )
    return default


def _component_bytes(cfg: dict[str, Any], native: Precision,
                     dense_layers: int) -> dict[str, float]:  # fmt: skip
    """Which modules the checkpoint quantized, and their bytes per parameter."""
    # Modules left unquantized ship in the model dtype (native.communication), which for
    # ModelOpt NVFP4 differs from the (FP4) activation dtype.
    act = dtype_bytes(native.communication)
    if native.weights in ("bf16", "fp16", "fp32"):
        return dict.fromkeys(COMPONENTS, dtype_bytes(native.weights))
    q = cfg.get("quantization_config") or {}
    ignore = [str(x) for x in (q.get("ignore") or q.get("modules_to_not_convert")
                               or q.get("exclude_modules") or [])]  # fmt: skip
    quant = dtype_bytes(native.weights)
    group = 0
    for group_cfg in (q.get("config_groups") or {}).values():
        group = int((group_cfg.get("weights") or {}).get("group_size") or 0)
        break
    if native.weights == "nvfp4":
        quant = 0.5 + 1.0 / 16  # one fp8 scale per 16 weights (+ a per-tensor fp32)
    elif native.weights == "mxfp4":
        quant = 0.5 + 1.0 / 32  # one e8m0 scale per 32 weights
    elif native.weights == "int4" and group:
        quant = 0.5 + 2.0 / group  # one bf16 scale per group
    elif native.weights.startswith("fp8") and q.get("weight_block_size"):
        bs = q["weight_block_size"]
        quant = 1.0 + 4.0 / (int(bs[0]) * int(bs[-1]))  # one fp32 scale per block
    out = dict.fromkeys(COMPONENTS, quant)
    out["lm_head"] = act  # embeddings / lm_head ship in the model dtype
    for component in unquantized(ignore, dense_layers):
        out[component] = act
    return out


def from_config(config: dict[str, Any], name: str = "", source: str = "") -> ModelSpec:
    """A ModelSpec from a parsed HF config dict; PlannerInputError with one line if unusable."""
    where = source or name or "config.json"
    if not isinstance(config, dict):
        raise PlannerInputError(f"{where}: not a transformer config.json (not a JSON object)")
    cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    if "quantization_config" in config and "quantization_config" not in cfg:
        cfg = {**cfg, "quantization_config": config["quantization_config"]}
    try:
        native = from_hf_config(config)
    except NativeError as exc:
        raise PlannerInputError(f"{where}: {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise PlannerInputError(f"{where}: malformed quantization_config ({exc})") from None
    hidden = _int(cfg, "hidden_size", "d_model", where=where)
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", where=where)
    heads = _int(cfg, "num_attention_heads", "n_head", where=where)
    vocab = _int(cfg, "vocab_size", where=where)
    if min(hidden, layers, heads, vocab) <= 0:
        raise PlannerInputError(f"{where}: hidden_size, layers, heads and vocab must be > 0")
    experts = _int(
        cfg,
        "n_routed_experts",
        "num_local_experts",
        "num_experts",
        "n_routed_experts",
        default=0,
        where=where,
    )
    top_k = _int(cfg, "num_experts_per_tok", "moe_topk", "top_k", default=0, where=where)
    if experts and not 0 < top_k <= experts:
        raise PlannerInputError(f"{where}: num_experts_per_tok {top_k} not in 1..{experts}")
    inter = _int(cfg, "intermediate_size", "ffn_dim", default=4 * hidden, where=where)
    moe_inter = _int(cfg, "moe_intermediate_size", default=inter if experts else 0, where=where)
    if not experts:
        dense_inter = inter
    elif "moe_intermediate_size" in cfg:
        dense_inter = inter  # DeepSeek: intermediate_size is the dense MLP's
    else:
        dense_inter = _int(cfg, "mlp_intermediate_size", default=0, where=where)
    dense_layers = layers
    if experts:
        dense_layers = _int(cfg, "first_k_dense_replace", default=0, where=where)
        dense_layers += len(cfg.get("mlp_only_layers") or [])
        dense_layers = min(dense_layers, layers)
    n_shared = _int(cfg, "n_shared_experts", default=0, where=where)
    shared_inter = n_shared * moe_inter
    shared_inter = _int(
        cfg, "shared_expert_intermediate_size", "shared_intermediate_size",
        default=shared_inter, where=where,
    )  # fmt: skip
    if shared_inter and not n_shared:
        n_shared = 1
    mla = bool(cfg.get("kv_lora_rank"))
    kv_heads = _int(cfg, "num_key_value_heads", default=heads, where=where) if not mla else heads
    head_dim = _int(cfg, "head_dim", default=hidden // heads, where=where)
    spec = ModelSpec(
        name=name or str(cfg.get("model_type") or config.get("model_type") or "model"),
        architecture=str((config.get("architectures") or cfg.get("architectures") or ["?"])[0]),
        num_layers=layers,
        num_dense_layers=dense_layers,
        hidden=hidden,
        vocab=vocab,
        num_experts=experts,
        top_k=top_k if experts else 0,
        num_shared_experts=n_shared,
        expert_intermediate=moe_inter if experts else 0,
        shared_intermediate=shared_inter,
        dense_intermediate=dense_inter,
        attention="mla" if mla else "gqa",
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        q_lora_rank=_int(cfg, "q_lora_rank", default=0, where=where) if mla else 0,
        kv_lora_rank=_int(cfg, "kv_lora_rank", default=0, where=where) if mla else 0,
        qk_rope_dim=_int(cfg, "qk_rope_head_dim", default=0, where=where) if mla else 0,
        qk_nope_dim=_int(cfg, "qk_nope_head_dim", default=0, where=where) if mla else 0,
        v_head_dim=_int(cfg, "v_head_dim", default=0, where=where) if mla else 0,
        native=native,
        source=source or name,
    )
    types = [str(t) for t in (cfg.get("layer_types") or [])]
    window = _int(cfg, "sliding_window", default=0, where=where) if types else 0
    spec = replace(
        spec,
        sliding_window=window,
        window_layers=sum(t.startswith("sliding") for t in types) if window else 0,
        linear_layers=sum(t.startswith("linear") for t in types),
        sparse_topk=_int(cfg, "index_topk", default=0, where=where),
        index_head_dim=_int(cfg, "index_head_dim", default=0, where=where),
        index_heads=_int(cfg, "index_n_heads", default=0, where=where),
        attention_sinks=str(cfg.get("model_type", "")).startswith("gpt_oss"),
        max_context=_int(cfg, "max_position_embeddings", default=0, where=where),
    )
    comp = _component_bytes(cfg, native, dense_layers if experts else 0)
    return _with_bytes(spec, comp)


def _with_bytes(spec: ModelSpec, comp: dict[str, float]) -> ModelSpec:
    return replace(spec, bytes_per_param=tuple(sorted(comp.items())))


def load(path: str | Path) -> ModelSpec:
    """A ModelSpec from a config.json path (or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    data = _read_json(p)
    quant = _modelopt_beside(p)
    if quant is not None and isinstance(data, dict):
        data = with_modelopt(data, quant)
    return from_config(data, name=p.parent.name if p.name == "config.json" else p.stem,
                       source=str(p))  # fmt: skip


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlannerInputError(
            f"{p}: cannot read ({exc.strerror or type(exc).__name__})"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlannerInputError(f"{p}: not JSON ({exc})") from None


def _modelopt_beside(p: Path) -> Any:
    """ModelOpt's ``hf_quant_config.json`` beside the config (``X_config.json`` ->
    ``X_hf_quant_config.json`` for the fixture's flat naming), or None."""
    for cand in (
        p.with_name("hf_quant_config.json"),
        p.with_name(p.name.replace("_config.json", "_hf_quant_config.json")),
    ):
        if cand != p and cand.is_file():
            return _read_json(cand)
    return None


def with_modelopt(config: dict[str, Any], hf_quant: Any) -> dict[str, Any]:
    """The config with ModelOpt's quantization (NVFP4 / FP8) as its quantization_config,
    unless the config already carries one."""
    q = hf_quant.get("quantization") if isinstance(hf_quant, dict) else None
    if (
        not isinstance(q, dict)
        or config.get("quantization_config")
        or (
            isinstance(config.get("text_config"), dict)
            and config["text_config"].get("quantization_config")
        )
    ):
        return config
    return {**config, "quantization_config": {"quant_method": "modelopt", **q}}


def resolve(name_or_path: str) -> ModelSpec:
    """A preset name (kimi-k2.5, deepseek-v3, minimax-m2.5) or a config.json path."""
    if name_or_path in MODEL_PRESETS:
        return preset(name_or_path)
    p = Path(name_or_path)
    if p.exists():
        return load(p)
    raise PlannerInputError(
        f"--model {name_or_path!r}: neither a model preset ({', '.join(MODEL_PRESETS)}) "
        "nor an existing config.json"
    )


# ---- models recorded in the store's run arguments ---------------------------------------
_ALIASES = {"kimi-k2": "kimi-k2.5", "deepseek-v3": "deepseek-v3", "deepseek-r1": "deepseek-v3",
            "minimax-m2": "minimax-m2.5"}  # fmt: skip


def preset_for_name(name: str) -> str | None:
    """The preset a served model name (``moonshotai/Kimi-K2.5``) corresponds to, if any."""
    low = name.lower().rsplit("/", 1)[-1]
    return next((p for key, p in _ALIASES.items() if low.startswith(key)), None)


def from_run_metadata(meta: Any, source: str) -> ModelSpec:
    """A ModelSpec from a run's recorded ``model`` argument: a shape dict (the `profile`
    collector's) or a served model name that matches a preset."""
    if isinstance(meta, str):
        name = preset_for_name(meta)
        if name is None:
            raise PlannerInputError(f"{source}: model {meta!r} matches no preset; "
                                    "give its config.json instead")  # fmt: skip
        return replace(preset(name), source=f"{source}: {meta} -> preset {name}")
    if not isinstance(meta, dict):
        raise PlannerInputError(f"{source}: recorded model is neither a name nor a shape")
    mla = meta.get("attention") == "mla"
    cfg: dict[str, Any] = {
        "model_type": str(meta.get("name") or "recorded"), "torch_dtype": "bfloat16",
        "hidden_size": meta.get("hidden"), "num_hidden_layers": meta.get("layers"),
        "num_attention_heads": meta.get("q_heads"), "vocab_size": meta.get("vocab"),
        "num_key_value_heads": meta.get("kv_heads") or meta.get("q_heads"),
        "n_routed_experts": meta.get("experts") or 0,
        "num_experts_per_tok": meta.get("top_k") or 0,
        "n_shared_experts": meta.get("shared_experts") or 0,
        "moe_intermediate_size": meta.get("expert_inter") or 0,
        "intermediate_size": meta.get("dense_inter") or meta.get("expert_inter") or 0,
        "first_k_dense_replace": meta.get("dense_layers") or 0,
    }  # fmt: skip
    if meta.get("head_dim"):
        cfg["head_dim"] = meta["head_dim"]
    if mla:
        cfg.update(q_lora_rank=meta.get("q_lora") or 0, kv_lora_rank=meta.get("kv_lora") or 0,
                   qk_rope_head_dim=meta.get("rope_dim") or 0,
                   qk_nope_head_dim=meta.get("nope_dim") or 0, v_head_dim=meta.get("v_dim") or 0)  # fmt: skip
    return from_config(cfg, name=f"{meta.get('name') or 'model'} (recorded)", source=source)


# ---- presets: HF-style configs with the shapes of REFERENCE §4, parsed like any file ----
_MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128}  # fmt: skip
_FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
              "weight_block_size": [128, 128]}  # fmt: skip
_KIMI_TEXT = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168,
    "num_hidden_layers": 61, "first_k_dense_replace": 1, "n_routed_experts": 384,
    "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "intermediate_size": 18432, "num_attention_heads": 64, "num_key_value_heads": 64,
    "vocab_size": 163840, "torch_dtype": "bfloat16", "max_position_embeddings": 262144, **_MLA,
}  # fmt: skip
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "kimi-k2.5": {
        "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
        "text_config": _KIMI_TEXT,
        "quantization_config": {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                            "strategy": "group", "group_size": 32}}},
            "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                       "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        },
    },
    "deepseek-v3": {
        **_KIMI_TEXT, "model_type": "deepseek_v3", "first_k_dense_replace": 3,
        "n_routed_experts": 256, "num_attention_heads": 128, "num_key_value_heads": 128,
        "vocab_size": 129280, "quantization_config": _FP8_BLOCK,
        "max_position_embeddings": 163840,
    },
    "minimax-m2.5": {
        "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
        "hidden_size": 3072, "num_hidden_layers": 62, "num_attention_heads": 48,
        "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 256,
        "num_experts_per_tok": 8, "intermediate_size": 1536, "shared_intermediate_size": 0,
        "vocab_size": 200064, "torch_dtype": "bfloat16", "max_position_embeddings": 196608,
        "quantization_config": {**_FP8_BLOCK, "modules_to_not_convert": ["gate", "lm_head"]},
    },
}  # fmt: skip


def preset(name: str) -> ModelSpec:
    if name not in MODEL_PRESETS:
        raise PlannerInputError(
            f"model preset {name!r} unknown (known: {', '.join(MODEL_PRESETS)})"
        )
    return from_config(MODEL_PRESETS[name], name=name, source=f"preset {name} (REFERENCE §4)")
