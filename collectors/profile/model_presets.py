"""Model shapes for the built-in MoE decode step (HF config.json, REFERENCE.md section 4).

A preset is the full-size model; ``scaled`` shrinks the widths by one factor so the step
fits a laptop CPU while keeping the structure (attention kind, top-k, shared expert,
head ratios) and staying divisible by the tensor-parallel size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    experts: int  # routed experts
    top_k: int
    shared_experts: int
    expert_inter: int  # per-expert intermediate size
    attention: str  # "mla" | "gqa"
    q_heads: int
    kv_heads: int  # GQA only (MLA has one latent KV "head")
    head_dim: int  # GQA head size
    q_lora: int  # MLA ranks (0 for GQA)
    kv_lora: int
    rope_dim: int
    nope_dim: int
    v_dim: int
    vocab: int


PRESETS: dict[str, ModelShape] = {
    # Kimi-K2.5 / K2: DeepSeek-V3 layout with 384 experts and 64 MLA heads.
    "kimi-k2.5": ModelShape(
        "kimi-k2.5", 61, 7168, 384, 8, 1, 2048, "mla", 64, 1, 0, 1536, 512, 64, 128, 128, 163840
    ),  # fmt: skip
    "deepseek-v3": ModelShape(
        "deepseek-v3", 61, 7168, 256, 8, 1, 2048, "mla", 128, 1, 0, 1536, 512, 64, 128, 128, 129280
    ),  # fmt: skip
    # MiniMax-M2.5: GQA 48 q / 8 kv heads of 128, no shared expert.
    "minimax-m2.5": ModelShape(
        "minimax-m2.5", 62, 3072, 256, 8, 0, 1536, "gqa", 48, 8, 128, 0, 0, 0, 0, 0, 200064
    ),  # fmt: skip
}
DEFAULT_PRESET = "kimi-k2.5"


def _width(value: int, scale: float, multiple: int, floor: int) -> int:
    """``value * scale`` rounded up to a multiple (keeps TP splits and SIMD-friendly sizes)."""
    return 0 if value == 0 else max(floor, multiple * math.ceil(value * scale / multiple))


def scaled(shape: ModelShape, scale: float, tp: int, layers: int) -> ModelShape:
    """Shrink widths by ``scale`` (heads and experts too), keeping every TP split exact."""
    if not 0 < scale <= 1:
        raise ValueError("scale must be in (0, 1]")
    q_heads = _width(shape.q_heads, scale, tp, tp)
    kv_heads = shape.kv_heads
    if shape.attention == "gqa":
        # Keep the q/kv ratio and at least one kv head per rank.
        kv_heads = _width(shape.kv_heads, scale, tp, tp)
        q_heads = kv_heads * max(1, shape.q_heads // shape.kv_heads)
    return replace(
        shape,
        layers=layers,
        hidden=_width(shape.hidden, scale, 16, 64),
        experts=max(2 * shape.top_k, _width(shape.experts, scale, 1, 1)),
        expert_inter=_width(shape.expert_inter, scale, 8 * tp, 8 * tp),
        q_heads=q_heads,
        kv_heads=kv_heads,
        head_dim=_width(shape.head_dim, scale, 8, 16),
        q_lora=_width(shape.q_lora, scale, 8, 16),
        kv_lora=_width(shape.kv_lora, scale, 8, 16),
        rope_dim=_width(shape.rope_dim, scale, 8, 8),
        nope_dim=_width(shape.nope_dim, scale, 8, 8),
        v_dim=_width(shape.v_dim, scale, 8, 8),
        vocab=_width(shape.vocab, scale, 64 * tp, 64 * tp),
    )
