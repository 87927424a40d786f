"""The built-in MoE decode step, tensor-parallel over the ranks of the default process group.

One layer = MLA (or GQA) attention reading a KV cache, row-parallel ``o_proj`` + AllReduce,
then a router, top-k routed experts and a shared expert, one AllReduce for the MoE output
(as vLLM does at TP>1, DP=1). The step ends with a vocab-parallel ``lm_head``, an AllGather
of the logits and greedy sampling. The same functions run on CPU (gloo) and CUDA (NCCL).

Each part runs inside a ``record_function`` region named ``stepscope::<category>`` so a CPU
trace, which has no GPU kernels to classify, still says which part of the step each op
belongs to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.profiler import record_function

from collectors.profile.model_presets import ModelShape

REGION = "stepscope::"  # prefix of every annotation this workload emits


def region(category: str) -> Any:
    return record_function(REGION + category)


@dataclass
class Layer:
    """One decoder layer's weights for this rank (sharded where TP shards them)."""

    attn_norm: torch.Tensor
    moe_norm: torch.Tensor
    attn: dict[str, torch.Tensor]
    kv_cache: torch.Tensor  # MLA: [B, C, kv_lora + rope]; GQA: [2, B, kv_heads, C, head_dim]
    router: torch.Tensor  # [H, E], replicated so every rank routes alike
    w_gate_up: torch.Tensor  # [E, H, 2 * I/tp]
    w_down: torch.Tensor  # [E, I/tp, H]
    shared_gate_up: torch.Tensor | None
    shared_down: torch.Tensor | None


@dataclass
class Model:
    shape: ModelShape
    tp: int
    layers: list[Layer]
    final_norm: torch.Tensor
    lm_head: torch.Tensor  # [H, V/tp]


def _randn(gen: torch.Generator, *size: int, device: torch.device, dtype: torch.dtype):
    fan_in = size[-2] if len(size) >= 2 else size[-1]
    t = torch.randn(*size, generator=gen, dtype=torch.float32) / math.sqrt(max(fan_in, 1))
    return t.to(device=device, dtype=dtype)


def build(
    shape: ModelShape, rank: int, tp: int, batch: int, context: int,
    device: torch.device, dtype: torch.dtype,
) -> Model:  # fmt: skip
    """Random weights: replicated parts share a seed, sharded parts are seeded per rank."""
    common = torch.Generator().manual_seed(1234)
    local = torch.Generator().manual_seed(5678 + rank)
    H, E, inter = shape.hidden, shape.experts, shape.expert_inter // tp

    def rep(*size: int) -> torch.Tensor:
        return _randn(common, *size, device=device, dtype=dtype)

    def shard(*size: int) -> torch.Tensor:
        return _randn(local, *size, device=device, dtype=dtype)

    layers = []
    for _ in range(shape.layers):
        if shape.attention == "mla":
            h = shape.q_heads // tp
            attn = {
                "q_a": rep(H, shape.q_lora), "q_a_norm": torch.ones(shape.q_lora, device=device,
                                                                    dtype=dtype),
                "q_b": shard(shape.q_lora, h * (shape.nope_dim + shape.rope_dim)),
                "kv_a": rep(H, shape.kv_lora + shape.rope_dim),
                "w_uk": shard(h, shape.nope_dim, shape.kv_lora),
                "w_uv": shard(h, shape.kv_lora, shape.v_dim),
                "o": shard(h * shape.v_dim, H),
            }  # fmt: skip
            cache = rep(batch, context, shape.kv_lora + shape.rope_dim)
        else:
            hq, hk, d = shape.q_heads // tp, shape.kv_heads // tp, shape.head_dim
            attn = {"qkv": shard(H, (hq + 2 * hk) * d), "o": shard(hq * d, H)}
            cache = rep(2, batch, hk, context, d)
        shared = shape.shared_experts
        layers.append(
            Layer(
                attn_norm=torch.ones(H, device=device, dtype=dtype),
                moe_norm=torch.ones(H, device=device, dtype=dtype),
                attn=attn,
                kv_cache=cache,
                router=rep(H, E),
                w_gate_up=shard(E, H, 2 * inter),
                w_down=shard(E, inter, H),
                shared_gate_up=shard(H, 2 * inter * shared) if shared else None,
                shared_down=shard(inter * shared, H) if shared else None,
            )
        )
    return Model(shape, tp, layers, torch.ones(H, device=device, dtype=dtype),
                 shard(H, shape.vocab // tp))  # fmt: skip


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    with region("norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps=1e-6)


def all_reduce(x: torch.Tensor, tp: int) -> torch.Tensor:
    if tp > 1:
        with region("allreduce"):
            dist.all_reduce(x)
    return x


def attention_mla(x: torch.Tensor, layer: Layer, shape: ModelShape, pos: int) -> torch.Tensor:
    """MLA decode in the absorbed form (queries in the latent space), heads split over TP."""
    w, B = layer.attn, x.shape[0]
    h = w["w_uk"].shape[0]
    with region("gemm"):
        q_a = x @ w["q_a"]
    q_a = rms_norm(q_a, w["q_a_norm"])
    with region("gemm"):
        q = (q_a @ w["q_b"]).view(B, h, shape.nope_dim + shape.rope_dim)
        kv_new = x @ w["kv_a"]
    with region("memory"):
        layer.kv_cache[:, pos].copy_(kv_new)  # append this token to the cache
    with region("attention"):
        q_nope, q_rope = q.split([shape.nope_dim, shape.rope_dim], dim=-1)
        q_lat = torch.bmm(q_nope.transpose(0, 1), w["w_uk"]).transpose(0, 1)  # [B, h, kv_lora]
        q_full = torch.cat([q_lat, q_rope], dim=-1).unsqueeze(2)  # [B, h, 1, kv_lora + rope]
        cache = layer.kv_cache.unsqueeze(1)  # one latent head shared by all query heads
        k = cache.expand(B, h, -1, -1)
        v = cache[..., : shape.kv_lora].expand(B, h, -1, -1)
        scale = 1.0 / math.sqrt(shape.nope_dim + shape.rope_dim)
        out = F.scaled_dot_product_attention(q_full, k, v, scale=scale).squeeze(2)
        out = torch.bmm(out.transpose(0, 1), w["w_uv"]).transpose(0, 1).reshape(B, -1)
    with region("gemm"):
        return out @ w["o"]


def attention_gqa(x: torch.Tensor, layer: Layer, shape: ModelShape, pos: int) -> torch.Tensor:
    w, B, d = layer.attn, x.shape[0], shape.head_dim
    hk = layer.kv_cache.shape[2]
    hq = w["o"].shape[0] // d
    with region("gemm"):
        qkv = x @ w["qkv"]
    q, k_new, v_new = qkv.split([hq * d, hk * d, hk * d], dim=-1)
    with region("memory"):
        layer.kv_cache[0, :, :, pos].copy_(k_new.view(B, hk, d))
        layer.kv_cache[1, :, :, pos].copy_(v_new.view(B, hk, d))
    with region("attention"):
        k = layer.kv_cache[0].repeat_interleave(hq // hk, dim=1)
        v = layer.kv_cache[1].repeat_interleave(hq // hk, dim=1)
        out = F.scaled_dot_product_attention(q.reshape(B, hq, 1, d), k, v).reshape(B, hq * d)
    with region("gemm"):
        return out @ w["o"]


def moe(x: torch.Tensor, layer: Layer, shape: ModelShape) -> torch.Tensor:
    """Router, top-k routed experts (each expert's FFN split over TP) and the shared expert."""
    with region("moe"):
        logits = x @ layer.router
        weights, ids = torch.topk(torch.sigmoid(logits.float()), shape.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        flat_ids = ids.flatten()
        order = torch.argsort(flat_ids)
        counts = torch.bincount(flat_ids, minlength=shape.experts).tolist()
        token_of = order // shape.top_k
        start = 0
        for expert, n in enumerate(counts):
            if n == 0:
                continue
            rows = token_of[start : start + n]
            slots = order[start : start + n]
            start += n
            gate, up = (x[rows] @ layer.w_gate_up[expert]).chunk(2, dim=-1)
            y = (F.silu(gate) * up) @ layer.w_down[expert]
            out.index_add_(0, rows, y * weights.flatten()[slots].unsqueeze(-1))
    if layer.shared_gate_up is not None:
        with region("gemm"):
            gate, up = (x @ layer.shared_gate_up).chunk(2, dim=-1)
        with region("elementwise"):
            act = F.silu(gate) * up
        with region("gemm"):
            out = out + act @ layer.shared_down
    return out


def decode_step(model: Model, x: torch.Tensor, pos: int) -> torch.Tensor:
    """One decode step for ``x`` [tokens, hidden]; returns the sampled token ids."""
    shape, tp = model.shape, model.tp
    attend = attention_mla if shape.attention == "mla" else attention_gqa
    for layer in model.layers:
        h = all_reduce(attend(rms_norm(x, layer.attn_norm), layer, shape, pos), tp)
        with region("elementwise"):
            x = x + h
        h = all_reduce(moe(rms_norm(x, layer.moe_norm), layer, shape), tp)
        with region("elementwise"):
            x = x + h
    x = rms_norm(x, model.final_norm)
    with region("gemm"):
        local_logits = x @ model.lm_head
    if tp > 1:
        with region("allgather"):
            parts = [torch.empty_like(local_logits) for _ in range(tp)]
            dist.all_gather(parts, local_logits)
            logits = torch.cat(parts, dim=-1)
    else:
        logits = local_logits
    with region("sampling"):
        return torch.argmax(torch.softmax(logits.float(), dim=-1), dim=-1)
