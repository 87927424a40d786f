"""The compute ops of one step on the busiest GPU: what each moves and computes, and where a
profiler files its kernels.

:func:`decode_ops` is the one place the planner's bytes and FLOPs of a step live. The serving
prediction (planner.cost.step.decode_terms) prices its ops with the fitted efficiencies; the
physical floors (planner.cost.floors) price the same ops at the spec sheet's bandwidth and
tensor peak. Each op names the trace category (store.trace_vocab.CATEGORIES) its kernels land
in, so a floor meets the measured time of the same kernels:

- attention projections (QKV / O, MLA's q / kv projections and absorbed BMMs, a sparse
  layer's indexer GEMMs), the dense MLP and the LM head are GEMMs: ``gemm``;
- the KV-cache reads and the attention FLOPs: ``attention``;
- routed and shared experts: ``moe`` (vLLM runs the shared expert inside its fused-MoE op,
  and the trace importer counts graph GEMMs between MoE kernels as MoE);
- the sampler's read of the logits: ``sampling``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.params import KERNELS
from planner.cost.routing import expected_max_binomial, measured
from planner.cost.types import ServeLayout, Workload
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec, dtype_bytes

LOGIT_BYTES = 4.0  # logits are fp32 where the sampler reads them
LOGIT_PASSES = 3  # written by the LM head, copied to fp32, read by the sampler


def family(bpp: float, weights: str) -> str:
    """The kernel family of a component from its bytes per parameter and the checkpoint."""
    if bpp >= 2.0:
        return "bf16"
    if bpp >= 1.0:
        return "fp8"
    return "int4" if weights.startswith("int") else "fp4"


def native_format(fam: str, hw: HardwareSpec) -> bool:
    """Whether the GPU has tensor cores for this family (else it is emulated in BF16)."""
    return {"fp8": hw.fp8_tflops > 0, "fp4": hw.fp4_tflops > 0}.get(fam, True)


def peak(fam: str, hw: HardwareSpec, activations: str = "") -> float:
    """Dense tensor FLOP/s a GEMM of this family reaches at peak. W4A16 and emulated formats
    compute in BF16; W4A8 (FP8 Marlin inputs) on FP8 tensor cores."""
    if fam == "fp4" and hw.fp4_tflops:
        return hw.fp4_tflops * 1e12
    if (fam == "fp8" or (fam == "int4" and activations.startswith("fp8"))) and hw.fp8_tflops:
        return hw.fp8_tflops * 1e12
    return hw.bf16_tflops * 1e12


def kv_layer_bytes(m: ModelSpec, b: float, tp: int) -> float:
    if m.attention == "mla":
        return (m.kv_lora_rank + m.qk_rope_dim) * b
    return 2 * max(1.0, m.num_kv_heads / max(tp, 1)) * m.head_dim * b


def kv_read_per_seq(m: ModelSpec, ctx: np.ndarray, b: float, tp: int) -> np.ndarray:
    """KV bytes one sequence's decode step reads on one GPU at context ``ctx``."""
    per = kv_layer_bytes(m, b, tp)
    full = m.num_layers - m.window_layers - m.linear_layers
    out = full * np.minimum(ctx, m.sparse_topk or np.inf) * per
    if m.sparse_topk:
        out = out + full * ctx * m.index_head_dim  # FP8 indexer keys, read whole
    out = out + m.window_layers * np.minimum(ctx, m.sliding_window) * per
    return out


@dataclass(slots=True)
class Attend:
    """Sequences reading their KV cache in a step: ``seqs`` sequences of ``keys`` KV tokens
    each, whose ``queries`` query tokens attend ``keys_per_query`` keys each (a decode
    sequence: one query over its whole context; a prompt chunk: many, causally)."""

    seqs: np.ndarray
    keys: np.ndarray | float
    queries: np.ndarray
    keys_per_query: np.ndarray | float
    prefill: bool = False

    @classmethod
    def decode(cls, seqs: np.ndarray, context: np.ndarray | float) -> Attend:
        return cls(seqs, context, seqs, context)


@dataclass(slots=True)
class StepShape:
    """What one attention rank runs in a step: ``tokens`` through the layers, ``sampled`` rows
    through the LM head, who reads which KV, and the tokens every attention rank sends the MoE
    together (``moe_tokens``)."""

    tokens: np.ndarray
    sampled: np.ndarray
    attends: tuple[Attend, ...]
    moe_tokens: np.ndarray

    @classmethod
    def decode(cls, B: np.ndarray, context: np.ndarray | float,
               moe_tokens: np.ndarray) -> StepShape:  # fmt: skip
        """``B`` decode sequences at ``context`` tokens each."""
        return cls(B, B, (Attend.decode(B, context),), moe_tokens)


@dataclass(slots=True)
class RoutedExperts:
    """The routed experts of a step: how many the mean and the busiest EP rank run per MoE
    layer, one expert's bytes over all MoE layers on one GPU, and its grouped-GEMM kernels;
    ``token_factor``: the busiest rank's tokens over the mean rank's (1 under uniform routing;
    the op's FLOPs are the busiest rank's)."""

    mean: np.ndarray
    busiest: np.ndarray
    bytes_each: float
    layers: int
    fused: bool
    token_factor: float = 1.0


@dataclass(slots=True)  # plain and slotted: the fit builds ~10^6 of them
class StepOp:
    """One op of a step on the busiest GPU.

    ``term``: the prediction's term it adds to; ``category``: the trace category its kernels
    land in; ``kernels``: its launches per step (the prediction's per-kernel floors); ops
    sharing a ``roof`` are one roofline in the prediction (one kernel sequence whose bytes and
    FLOPs overlap) and are floored apart; ``experts``: the routed experts' load (the
    prediction prices the mean rank and the busiest rank's extra); ``overlaps_experts``: its
    kernels may run on a second stream beside the routed experts."""

    term: str
    category: str
    what: str
    nbytes: np.ndarray
    flops: np.ndarray
    family: str
    kernels: float = 0.0
    roof: str = ""
    experts: RoutedExperts | None = None
    overlaps_experts: bool = False


def decode_ops(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
               shape: StepShape) -> list[StepOp]:  # fmt: skip
    """Every compute op of a step of ``shape`` on the busiest rank, in execution order.

    Routed experts: the distinct experts the step's tokens touch (E x (1 - (1 - k/E)^T));
    under EP the busiest rank holds the expected maximum of a binomial over its E / EP
    experts, or with a measured distribution (``Workload.expert_load``) what it gives
    (planner.cost.routing)."""
    wts = m.native.weights
    kv_b = dtype_bytes(w.kv_dtype or m.native.kv_cache)
    L, Lm, Ld = m.num_layers, m.num_moe_layers, m.num_dense_layers
    B = shape.tokens
    rep, shard = m.attention_params()
    att_p = L * (rep + shard / lay.tp)
    att_kernels = KERNELS["attention_mla" if m.attention == "mla" else "attention_gqa"]
    if m.sparse_topk:
        att_kernels += KERNELS["dsa_indexer"]
    ops = [StepOp("attention", "gemm", "attention projections", att_p * m.bpp("attention"),
                  2 * B * att_p, family(m.bpp("attention"), wts), L * att_kernels)]  # fmt: skip
    kv = kv_flops = None
    for a in shape.attends:
        b = a.seqs * kv_read_per_seq(m, np.asarray(a.keys), kv_b, lay.tp)
        f = a.queries * m.attention_flops_per_token(a.keys_per_query, prefill=a.prefill)
        kv, kv_flops = (b, f) if kv is None else (kv + b, kv_flops + f)
    kv_flops = kv_flops / lay.tp if kv_flops is not None else 0.0
    kv = 0.0 if kv is None else kv
    ops.append(StepOp("kv_cache", "attention", "KV-cache reads", kv, kv_flops, "bf16"))
    if Ld:
        dp_ = Ld * m.dense_params / lay.tp
        ops.append(StepOp("mlp", "gemm", "dense MLP", dp_ * m.bpp("dense_mlp"), 2 * B * dp_,
                          family(m.bpp("dense_mlp"), wts), Ld * KERNELS["dense_mlp"]))  # fmt: skip
    if Lm:
        E, k, ep = m.num_experts, m.top_k, max(lay.moe_ep, 1)
        hot = 1.0  # the busiest rank's tokens over the mean rank's
        if w.expert_load is not None:  # a measured distribution (planner.cost.routing)
            r = measured(w.expert_load, k, shape.moe_tokens, ep)
            mean, busiest, hot = r.mean_experts, r.busiest_experts, r.token_factor
        else:
            touched = 1.0 - (1.0 - k / E) ** shape.moe_tokens
            mean = E / ep * touched
            busiest = expected_max_binomial(E // ep, touched, ep) if ep > 1 else mean
        fam = family(m.bpp("experts"), wts)
        per = Lm * m.expert_bytes() / lay.moe_tensor
        fused = fam == "fp4" and native_format(fam, hw)
        load = RoutedExperts(mean, busiest, per, Lm, fused, hot)
        ops.append(StepOp("experts", "moe", "routed experts", busiest * per,
                          2 * shape.moe_tokens * k * m.expert_params * Lm / lay.gpus * hot, fam,
                          Lm * KERNELS["moe_fused" if fused else "moe"], experts=load))  # fmt: skip
    if Lm and m.shared_params:
        sp = Lm * m.shared_params / lay.tp
        ops.append(StepOp("mlp", "moe", "shared experts", sp * m.bpp("shared"), 2 * B * sp,
                          family(m.bpp("shared"), wts), Lm * KERNELS["dense_mlp"],
                          overlaps_experts=True))  # fmt: skip
    lm = m.embed_params / lay.tp
    logits = shape.sampled * (m.vocab * LOGIT_BYTES)
    ops.append(StepOp("lm_head", "gemm", "LM head (+ the logits it writes and their fp32 copy)",
                      lm * m.bpp("lm_head") + logits * (LOGIT_PASSES - 1), 2 * shape.sampled * lm,
                      "bf16", 4, roof="lm_head"))  # fmt: skip
    ops.append(StepOp("lm_head", "sampling", "the sampler's read of the logits", logits,
                      0.0, "bf16", roof="lm_head"))  # fmt: skip
    return ops
