"""The built-in MoE decode step, tensor-parallel over the ranks of the default process group.

One layer = MLA (or GQA) attention reading a KV cache, row-parallel ``o_proj`` + AllReduce,
then a router, top-k routed experts and a shared expert, one AllReduce for the MoE output
(as vLLM does at TP>1, DP=1). The step ends with a vocab-parallel ``lm_head``, an AllGather
of the logits and greedy sampling. The same functions run on CPU (gloo) and CUDA (NCCL).

Like vLLM (``vllm::unified_attention``, ``vllm::moe_forward``, ``vllm::all_reduce``), the
attention, MoE, collectives and sampling are custom ops (``stepscope::*``). A CPU trace has
no GPU kernels, so the trace collector classifies its top-level CPU ops by name: these ops
make each part land in its category (attention, moe, allreduce, allgather, sampling) with
its whole time, including a collective's wait. GEMMs, norms, copies and residual adds are
plain aten ops (gemm, norm, memory, elementwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.library import custom_op

from collectors.profile.model_presets import ModelShape

# op name -> the category it is meant to land in (tests check the taxonomy agrees)
OP_CATEGORIES = {
    "stepscope::mla_attention": "attention", "stepscope::gqa_attention": "attention",
    "stepscope::moe": "moe", "stepscope::all_reduce": "allreduce",
    "stepscope::all_gather": "allgather", "stepscope::sample_greedy": "sampling",
}  # fmt: skip


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
    """Random weights drawn on ``device`` by a generator of that device: a CPU ``randn`` of
    a realistic ``--scale`` (GBs per rank) takes minutes and then a host-to-device copy."""
    fan_in = size[-2] if len(size) >= 2 else size[-1]
    t = torch.randn(*size, generator=gen, device=device, dtype=torch.float32)
    return t.mul_(1.0 / math.sqrt(max(fan_in, 1))).to(dtype=dtype)


def build(
    shape: ModelShape, rank: int, tp: int, batch: int, context: int,
    device: torch.device, dtype: torch.dtype,
) -> Model:  # fmt: skip
    """Random weights: replicated parts share a seed, sharded parts are seeded per rank."""
    # One generator per device kind: every rank draws the replicated parts on the same kind
    # of device from the same seed, so they agree without a broadcast.
    common = torch.Generator(device=device).manual_seed(1234)
    local = torch.Generator(device=device).manual_seed(5678 + rank)
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
    return F.rms_norm(x, (x.shape[-1],), weight, eps=1e-6)


@custom_op("stepscope::all_reduce", mutates_args=("x",))
def all_reduce(x: torch.Tensor) -> None:
    """Sum over the TP group in place; the op spans the wait, not just the launch."""
    dist.all_reduce(x)


@custom_op("stepscope::all_gather", mutates_args=())
def all_gather(x: torch.Tensor, world_size: int) -> torch.Tensor:
    """Concatenate every rank's ``x`` along the last dim (vocab-parallel logits)."""
    parts = [torch.empty_like(x) for _ in range(world_size)]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=-1)


@custom_op("stepscope::mla_attention", mutates_args=())
def mla_attention(
    q: torch.Tensor, kv_cache: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor,
    nope_dim: int, scale: float,
) -> torch.Tensor:  # fmt: skip
    """MLA decode, absorbed form: queries move to the latent space and read the latent cache.

    q [B, h, nope + rope], kv_cache [B, C, kv_lora + rope], w_uk [h, nope, kv_lora],
    w_uv [h, kv_lora, v] -> [B, h * v].
    """
    B, h, kv_lora = q.shape[0], q.shape[1], w_uk.shape[2]
    q_nope, q_rope = q[..., :nope_dim], q[..., nope_dim:]
    q_lat = torch.bmm(q_nope.transpose(0, 1), w_uk).transpose(0, 1)  # [B, h, kv_lora]
    q_full = torch.cat([q_lat, q_rope], dim=-1).unsqueeze(2)  # [B, h, 1, kv_lora + rope]
    cache = kv_cache.unsqueeze(1)  # one latent "head" shared by all query heads
    k = cache.expand(B, h, -1, -1)
    v = cache[..., :kv_lora].expand(B, h, -1, -1)
    out = F.scaled_dot_product_attention(q_full, k, v, scale=scale).squeeze(2)
    return torch.bmm(out.transpose(0, 1), w_uv).transpose(0, 1).reshape(B, -1)


@custom_op("stepscope::gqa_attention", mutates_args=())
def gqa_attention(q: torch.Tensor, kv_cache: torch.Tensor) -> torch.Tensor:
    """GQA decode: q [B, hq, d], kv_cache [2, B, hk, C, d] -> [B, hq * d]."""
    B, hq, d = q.shape
    group = hq // kv_cache.shape[2]
    k = kv_cache[0].repeat_interleave(group, dim=1)
    v = kv_cache[1].repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v).reshape(B, hq * d)


@custom_op("stepscope::moe", mutates_args=())
def moe(
    x: torch.Tensor, router: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor,
    top_k: int,
) -> torch.Tensor:  # fmt: skip
    """Router (sigmoid scores, top-k, renormalised) and the routed experts, each expert's
    FFN split over TP (this rank's slice); the caller all-reduces the partial sums."""
    experts = router.shape[1]
    scores = torch.sigmoid((x @ router).float())
    weights, ids = torch.topk(scores, top_k, dim=-1)
    weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype).flatten()
    out = torch.zeros_like(x)
    flat_ids = ids.flatten()
    order = torch.argsort(flat_ids)
    counts = torch.bincount(flat_ids, minlength=experts).tolist()
    token_of = order // top_k
    start = 0
    for expert, n in enumerate(counts):
        if n == 0:
            continue
        rows, slots = token_of[start : start + n], order[start : start + n]
        start += n
        gate, up = (x[rows] @ w_gate_up[expert]).chunk(2, dim=-1)
        y = (F.silu(gate) * up) @ w_down[expert]
        out.index_add_(0, rows, y * weights[slots].unsqueeze(-1))
    return out


@custom_op("stepscope::sample_greedy", mutates_args=())
def sample_greedy(logits: torch.Tensor) -> torch.Tensor:
    return torch.argmax(torch.softmax(logits.float(), dim=-1), dim=-1)


def attention_block(x: torch.Tensor, layer: Layer, shape: ModelShape, pos: int) -> torch.Tensor:
    """Projections (GEMMs), KV-cache write (copy), attention op, row-parallel o_proj."""
    w, B = layer.attn, x.shape[0]
    if shape.attention == "mla":
        h = w["w_uk"].shape[0]
        q_a = rms_norm(x @ w["q_a"], w["q_a_norm"])
        q = (q_a @ w["q_b"]).view(B, h, shape.nope_dim + shape.rope_dim)
        layer.kv_cache[:, pos].copy_(x @ w["kv_a"])  # append this token to the cache
        scale = 1.0 / math.sqrt(shape.nope_dim + shape.rope_dim)
        out = mla_attention(q, layer.kv_cache, w["w_uk"], w["w_uv"], shape.nope_dim, scale)
    else:
        d, hk = shape.head_dim, layer.kv_cache.shape[2]
        hq = w["o"].shape[0] // d
        q, k_new, v_new = (x @ w["qkv"]).split([hq * d, hk * d, hk * d], dim=-1)
        layer.kv_cache[0, :, :, pos].copy_(k_new.view(B, hk, d))
        layer.kv_cache[1, :, :, pos].copy_(v_new.view(B, hk, d))
        out = gqa_attention(q.reshape(B, hq, d), layer.kv_cache)
    return out @ w["o"]


def moe_block(x: torch.Tensor, layer: Layer, shape: ModelShape) -> torch.Tensor:
    out = moe(x, layer.router, layer.w_gate_up, layer.w_down, shape.top_k)
    if layer.shared_gate_up is not None:  # the shared expert: dense GEMMs on every token
        gate, up = (x @ layer.shared_gate_up).chunk(2, dim=-1)
        out = out + (F.silu(gate) * up) @ layer.shared_down
    return out


def decode_step(model: Model, x: torch.Tensor, pos: int) -> torch.Tensor:
    """One decode step for ``x`` [tokens, hidden]; returns the sampled token ids."""
    shape, tp = model.shape, model.tp
    for layer in model.layers:
        h = attention_block(rms_norm(x, layer.attn_norm), layer, shape, pos)
        if tp > 1:
            all_reduce(h)
        x = x + h
        h = moe_block(rms_norm(x, layer.moe_norm), layer, shape)
        if tp > 1:
            all_reduce(h)
        x = x + h
    logits = rms_norm(x, model.final_norm) @ model.lm_head
    if tp > 1:
        logits = all_gather(logits, tp)
    return sample_greedy(logits)
