"""One decode step's compute on the busiest GPU, op by op, and one prompt token's prefill cost.

Each op is its roofline (bytes over achieved bandwidth, FLOPs over achieved tensor peak, per
weight format and GPU generation) plus its kernels' floor (kernels x per-kernel floor under
CUDA graphs; the larger-of form fits the fixture worse: 11.6% vs 10.7% median vLLM TPOT):

- attention projections, KV-cache reads (MLA latent replicated over TP, GQA heads split by
  TP; sliding-window layers read at most the window, linear-attention layers a fixed state,
  sparse (DSA) layers the top-k plus the indexer keys), dense MLP, shared experts (their
  kernels' floors hidden behind the routed experts where the engine overlaps them);
- routed experts: the distinct experts the step's tokens touch (E x (1 - (1 - k/E)^T)); under
  EP the busiest rank holds the expected maximum of a binomial over its E / EP experts: the
  mean rank's share is ``experts``, the busiest rank's extra is ``expert_imbalance``;
- LM head and sampling over the vocabulary.

Collectives are planner.cost.step_comm's; queueing and TTFT planner.cost.ttft's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.params import EAGER_LAUNCH_US, FORMAT_BW, KERNELS, ServingParams
from planner.cost.routing import expected_max_binomial
from planner.cost.types import ServeLayout, Workload
from planner.specs.engines import shared_overlap_tokens
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec, dtype_bytes

COMPUTE_TERMS = ("attention", "kv_cache", "mlp", "experts", "expert_imbalance", "lm_head")


def family(bpp: float, weights: str) -> str:
    """The kernel family of a component from its bytes per parameter and the checkpoint."""
    if bpp >= 2.0:
        return "bf16"
    if bpp >= 1.0:
        return "fp8"
    return "int4" if weights.startswith("int") else "fp4"


def _native(fam: str, hw: HardwareSpec) -> bool:
    return {"fp8": hw.fp8_tflops > 0, "fp4": hw.fp4_tflops > 0}.get(fam, True)


def peak(fam: str, hw: HardwareSpec, activations: str = "") -> float:
    """Dense tensor FLOP/s a GEMM of this family reaches at peak. W4A16 and emulated formats
    compute in BF16; W4A8 (FP8 Marlin inputs) on FP8 tensor cores."""
    if fam == "fp4" and hw.fp4_tflops:
        return hw.fp4_tflops * 1e12
    if (fam == "fp8" or (fam == "int4" and activations.startswith("fp8"))) and hw.fp8_tflops:
        return hw.fp8_tflops * 1e12
    return hw.bf16_tflops * 1e12


def _kv_layer_bytes(m: ModelSpec, b: float, tp: int) -> float:
    if m.attention == "mla":
        return (m.kv_lora_rank + m.qk_rope_dim) * b
    return 2 * max(1.0, m.num_kv_heads / max(tp, 1)) * m.head_dim * b


def kv_read_per_seq(m: ModelSpec, ctx: np.ndarray, b: float, tp: int) -> np.ndarray:
    """KV bytes one sequence's decode step reads on one GPU at context ``ctx``."""
    per = _kv_layer_bytes(m, b, tp)
    full = m.num_layers - m.window_layers - m.linear_layers
    out = full * np.minimum(ctx, m.sparse_topk or np.inf) * per
    if m.sparse_topk:
        out = out + full * ctx * m.index_head_dim  # FP8 indexer keys, read whole
    out = out + m.window_layers * np.minimum(ctx, m.sliding_window) * per
    return out


def kv_store_per_seq(m: ModelSpec, tokens: float, b: float, tp: int) -> float:
    """KV bytes one sequence of ``tokens`` holds on one GPU (16-token blocks)."""
    per = _kv_layer_bytes(m, b, tp)
    t = np.ceil(tokens / 16) * 16
    full = m.num_layers - m.window_layers - m.linear_layers
    return float(full * t * per + m.window_layers * min(t, m.sliding_window + 16) * per)


def weights_per_gpu(m: ModelSpec, lay: ServeLayout) -> float:
    rep, shard = m.attention_params()
    att = m.num_layers * (rep + shard / lay.tp) * m.bpp("attention")
    dense = m.num_dense_layers * m.dense_params / lay.tp * m.bpp("dense_mlp")
    shared = m.num_moe_layers * m.shared_params / lay.tp * m.bpp("shared")
    emb = 2 * m.embed_params / lay.tp * m.bpp("lm_head")
    experts = m.routed_expert_bytes() / (lay.moe_tensor * max(lay.moe_ep, 1))
    return att + dense + shared + emb + experts


def decode_terms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
                 B: np.ndarray, p: ServingParams,
                 moe_tokens: np.ndarray | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Milliseconds of each compute op of one decode step with ``B`` sequences on the busiest
    rank; ``moe_tokens``: the tokens every attention rank sends the MoE together (default
    B x DP: every rank as busy as the busiest)."""
    bw = hw.mem_bandwidth_gbps * 1e9 * p.bw_eff
    wts, act = m.native.weights, w.activations
    kv_b = dtype_bytes(w.kv_dtype or m.native.kv_cache)
    ctx = w.isl + w.osl / 2.0  # mean context over a request's decode
    floor = p.kernel_us + (0.0 if w.cuda_graphs else EAGER_LAUNCH_US)
    L, Lm, Ld = m.num_layers, m.num_moe_layers, m.num_dense_layers
    # Every attention rank's tokens (or dummy token) meet in the MoE.
    moe_tok = B * lay.dp if moe_tokens is None else moe_tokens
    terms: dict[str, np.ndarray] = {t: np.zeros_like(B, dtype=float) for t in COMPUTE_TERMS}

    def roof(nbytes, flops, fam: str, eff: float = 1.0) -> np.ndarray:
        fmt = FORMAT_BW[(fam, _native(fam, hw))]
        return np.maximum(nbytes / (bw * eff * fmt), flops / (peak(fam, hw, act) * p.mfu)) * 1e3

    def op(name: str, nbytes, flops, fam: str, kernels: float, eff: float = 1.0) -> None:
        terms[name] = terms[name] + roof(nbytes, flops, fam, eff) + kernels * floor / 1e3

    rep, shard = m.attention_params()
    att_p = L * (rep + shard / lay.tp)
    att_kernels = KERNELS["attention_mla" if m.attention == "mla" else "attention_gqa"]
    if m.sparse_topk:
        att_kernels += KERNELS["dsa_indexer"]
    op("attention", att_p * m.bpp("attention"), 2 * B * att_p,
       family(m.bpp("attention"), wts), L * att_kernels)  # fmt: skip
    kv = B * kv_read_per_seq(m, np.asarray(ctx), kv_b, lay.tp)
    op("kv_cache", kv, B * m.attention_flops_per_token(ctx) / lay.tp, "bf16", 0)
    if Ld:
        dp_ = Ld * m.dense_params / lay.tp
        op("mlp", dp_ * m.bpp("dense_mlp"), 2 * B * dp_, family(m.bpp("dense_mlp"), wts),
           Ld * KERNELS["dense_mlp"])  # fmt: skip
    if Lm:
        E, k, ep = m.num_experts, m.top_k, max(lay.moe_ep, 1)
        touched = 1.0 - (1.0 - k / E) ** moe_tok
        mean = E / ep * touched
        busiest = expected_max_binomial(E // ep, touched, ep) if ep > 1 else mean
        fam = family(m.bpp("experts"), wts)
        ex_flops = 2 * moe_tok * k * m.expert_params * Lm / lay.gpus
        per = Lm * m.expert_bytes() / lay.moe_tensor
        # Grouped GEMM: each expert the busiest rank runs costs a tile-scheduling / scale-load
        # / tail overhead on top of its bytes, which dominates at 1-2 tokens per expert.
        mean_ms = roof(mean * per, ex_flops, fam, p.moe_eff) + Lm * mean * p.expert_us / 1e3
        top_ms = roof(busiest * per, ex_flops, fam, p.moe_eff) + Lm * busiest * p.expert_us / 1e3
        fused = fam == "fp4" and _native(fam, hw)
        terms["experts"] = mean_ms + Lm * KERNELS["moe_fused" if fused else "moe"] * floor / 1e3
        terms["expert_imbalance"] = top_ms - mean_ms
    if Lm and m.shared_params:
        sp = Lm * m.shared_params / lay.tp
        shared_floor = Lm * KERNELS["dense_mlp"] * floor / 1e3
        op("mlp", sp * m.bpp("shared"), 2 * B * sp, family(m.bpp("shared"), wts), 0)
        # Small batches run the shared expert on a second stream beside the routed experts
        # (planner.specs.engines.Engine.shared_overlap_tokens): its kernels' floors hide behind
        # the routed experts' time; its bytes still share the same HBM bandwidth.
        routed = terms["experts"] + terms["expert_imbalance"]
        hidden = np.where(shared_overlap_tokens(w.engine) >= B,
                          np.minimum(shared_floor, routed), 0.0)  # fmt: skip
        terms["mlp"] = terms["mlp"] + shared_floor - hidden
    lm = m.embed_params / lay.tp
    op("lm_head", lm * m.bpp("lm_head") + B * m.vocab * 4.0 * 3, 2 * B * lm, "bf16", 4)
    return {t: v * p.compute_scale for t, v in terms.items()}


@dataclass(frozen=True)
class PrefillCost:
    """Milliseconds of compute per prompt token, split by where it runs.

    ``attention_ms``: attention, dense and shared MLP and LM head, on the token's own
    attention rank (split over its TP group). ``expert_ms``: the routed experts, the token's
    share on each GPU of the MoE group (moe_tp x moe_ep GPUs). Under attention DP the
    ranks' tokens meet in the MoE (vLLM dispatches every DP rank's tokens to the expert
    owners; REFERENCE section 2), so one rank's prompt spreads its expert work over the whole
    group, and every GPU also runs the experts of the other ranks' prompts.
    """

    attention_ms: float
    expert_ms: float

    def per_token(self, ranks: np.ndarray | float) -> np.ndarray | float:
        """A prompt token's time when ``ranks`` attention ranks prefill at once."""
        return self.attention_ms + self.expert_ms * ranks

    def plus(self, own_ms: float, per_rank_ms: float) -> PrefillCost:
        """This cost with more milliseconds per token: on its own rank, and per busy rank."""
        return PrefillCost(self.attention_ms + own_ms, self.expert_ms + per_rank_ms)


def prefill_cost(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
                 p: ServingParams) -> PrefillCost:  # fmt: skip
    """One prompt token's compute (GEMMs + causal attention in the prefill form),
    compute-bound at the format's tensor peak x mfu."""
    rep, shard = m.attention_params()
    wts = m.native.weights

    def ms(n: float, bpp: float, eff: float) -> float:
        return 2 * n / (peak(family(bpp, wts), hw, w.activations) * eff) * 1e3 if n else 0.0

    attention = (ms(m.num_layers * (rep + shard / lay.tp), m.bpp("attention"), p.mfu)
                 + ms(m.num_dense_layers * m.dense_params / lay.tp, m.bpp("dense_mlp"), p.mfu)
                 + ms(m.num_moe_layers * m.shared_params / lay.tp, m.bpp("shared"), p.mfu)
                 + ms(m.embed_params / lay.tp, m.bpp("lm_head"), p.mfu))  # fmt: skip
    attn = m.attention_flops_per_token(w.isl / 2.0, prefill=True) / lay.tp
    attention += attn / (hw.bf16_tflops * 1e12 * p.mfu) * 1e3
    group = lay.moe_tensor * max(lay.moe_ep, 1)
    experts = ms(m.num_moe_layers * m.top_k * m.expert_params / group, m.bpp("experts"),
                 p.moe_mfu)  # fmt: skip
    return PrefillCost(attention * p.compute_scale, experts * p.compute_scale)
