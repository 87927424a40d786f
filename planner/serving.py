"""Serving cost model: mean TPOT, TTFT and output throughput of one engine instance.

What one decode step does on the busiest GPU, op by op, each op the larger of its roofline
(bytes over achieved bandwidth, FLOPs over achieved tensor peak, per weight format and GPU
generation) and its kernels' floor (kernels x per-kernel floor under CUDA graphs):

- attention projections, KV-cache reads (MLA latent replicated over TP, GQA heads split by
  TP; sliding-window layers read at most the window, linear-attention layers a fixed state,
  sparse (DSA) layers the top-k plus the indexer keys), dense MLP, shared experts;
- routed experts: the distinct experts the step's tokens touch (E x (1 - (1 - k/E)^T)), the
  busiest EP rank's share (expected maximum of a binomial), at the grouped-GEMM efficiency;
- LM head and sampling over the vocabulary; the engine's per-step overhead;
- collectives: 2 AllReduces per layer under TP, AllGather + ReduceScatter per MoE layer under
  attention-DP (measured curves when given, else spec latency + bytes over link bandwidth);
- prefill interference: in steady state about B x I / O prompt tokens join each decode step
  (chunked prefill), compute-bound at the format's tensor peak.

KV capacity: what the engine admits after weights and its reserve; the excess waits (TTFT).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel import expected_max_binomial
from planner.errors import PlannerInputError
from planner.hardware import HardwareSpec
from planner.models import ModelSpec, dtype_bytes
from planner.serving_params import EAGER_LAUNCH_US, FITTED, FORMAT_BW, KERNELS, ServingParams

ENGINES = ("vllm", "sglang", "trtllm")
_DEFAULT_ALPHA_US = {"nvlink": 8.0, "pcie": 27.0}


@dataclass(frozen=True)
class ServeLayout:
    """One instance: attention TP x DP ranks; MoE split moe_tp (tensor) x moe_ep (experts)."""

    tp: int
    dp: int = 1
    moe_tp: int = 0  # 0 = tp x dp / moe_ep
    moe_ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def moe_tensor(self) -> int:
        return self.moe_tp or max(self.gpus // max(self.moe_ep, 1), 1)

    def describe(self) -> str:
        parts = [f"TP={self.tp}"] + ([f"DP={self.dp} (attention)"] if self.dp > 1 else [])
        if self.moe_ep > 1:
            parts.append(f"EP={self.moe_ep}")
        return " ".join(parts)


class MeasuredCurves:
    """Stored comm curves (planner.comm.CommCurve) the serving model uses where they cover
    the op and world size; every other collective falls back to the host's spec figures."""

    def __init__(self, curves: list) -> None:
        self._by = {(c.op, c.world_size): c for c in curves
                    if c.kind in ("measured", "published")}  # fmt: skip

    def measured(self, op: str, n: int) -> bool:
        return (op, n) in self._by

    def latency_us(self, op: str, n: int, nbytes: np.ndarray) -> np.ndarray:
        return self._by[(op, n)].latency_us(nbytes)

    def sources(self) -> list[str]:
        return [c.describe() for c in self._by.values()]


@dataclass(frozen=True)
class Workload:
    isl: int
    osl: int
    engine: str = "vllm"
    kv_dtype: str = ""  # "" = the checkpoint's native KV dtype
    cuda_graphs: bool = True


@dataclass
class Prediction:
    concurrency: np.ndarray
    tpot_ms: np.ndarray
    ttft_ms: np.ndarray
    output_tok_s: np.ndarray
    running: np.ndarray  # sequences the engine runs at once (per attention rank)
    kv_capacity_seqs: float
    weights_per_gpu_gb: float
    breakdown_ms: dict[str, np.ndarray]


def family(bpp: float, weights: str) -> str:
    """The kernel family of a component from its bytes per parameter and the checkpoint."""
    if bpp >= 2.0:
        return "bf16"
    if bpp >= 1.0:
        return "fp8"
    return "int4" if weights.startswith("int") else "fp4"


def _native(fam: str, hw: HardwareSpec) -> bool:
    return {"fp8": hw.fp8_tflops > 0, "fp4": hw.fp4_tflops > 0}.get(fam, True)


def _peak(fam: str, hw: HardwareSpec) -> float:
    if fam == "fp4" and hw.fp4_tflops:
        return hw.fp4_tflops * 1e12
    if fam == "fp8" and hw.fp8_tflops:
        return hw.fp8_tflops * 1e12
    return hw.bf16_tflops * 1e12  # W4A16 / emulated formats compute in BF16


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


def check(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload) -> None:
    """One clear line for what this model cannot represent; never a guess."""
    limit = hw.max_gpus or hw.gpu_count
    if min(lay.tp, lay.dp, lay.moe_ep) < 1 or lay.gpus > limit:
        raise PlannerInputError(f"layout {lay.describe()} needs {lay.gpus} GPUs; host "
                                f"{hw.name!r} has {limit}")  # fmt: skip
    if lay.moe_ep > 1 and not m.num_experts:
        raise PlannerInputError(f"--ep: model {m.name!r} has no routed experts")
    if m.num_experts and lay.moe_ep > 1 and m.num_experts % lay.moe_ep:
        raise PlannerInputError(f"--ep: {m.num_experts} experts do not split over "
                                f"{lay.moe_ep} ranks")  # fmt: skip
    if m.attention == "gqa" and m.num_heads % lay.tp:
        raise PlannerInputError(f"--tp {lay.tp}: {m.num_heads} attention heads do not "
                                "split evenly")  # fmt: skip
    if w.isl < 1 or w.osl < 2:
        raise PlannerInputError("--isl must be >= 1 and --osl >= 2")
    if m.max_context and w.isl + w.osl > m.max_context:
        raise PlannerInputError(f"--isl {w.isl} + --osl {w.osl} exceeds {m.name}'s context "
                                f"of {m.max_context} tokens")  # fmt: skip
    if w.engine not in ENGINES:
        raise PlannerInputError(f"--engine {w.engine!r}: one of {', '.join(ENGINES)}")


def predict(
    m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, conc: np.ndarray,
    p: ServingParams = FITTED, comm: MeasuredCurves | None = None,
) -> Prediction:  # fmt: skip
    """Mean TPOT / TTFT / output tokens/s at each client concurrency (vectorised)."""
    check(m, hw, lay, w)
    c = np.asarray(conc, dtype=float)
    bw = hw.mem_bandwidth_gbps * 1e9 * p.bw_eff
    wts = m.native.weights
    kv_b = dtype_bytes(w.kv_dtype or m.native.kv_cache)
    ctx = w.isl + w.osl / 2.0  # mean context over a request's decode

    # -- admission: KV capacity per attention rank --------------------------------------
    held = weights_per_gpu(m, lay)
    budget = hw.memory_bytes * p.memory_utilization - held - p.reserve_gb * 1e9
    if budget <= 0:
        raise PlannerInputError(
            f"{m.name} does not fit on {lay.gpus}x {hw.gpu_model} as {lay.describe()}: "
            f"{held / 1e9:.0f} GB of weights per GPU, "
            f"{hw.memory_bytes * p.memory_utilization / 1e9:.0f} GB usable")  # fmt: skip
    cap = budget / max(kv_store_per_seq(m, w.isl + w.osl / 2.0, kv_b, lay.tp), 1.0)
    if cap < 1:
        raise PlannerInputError(
            f"{m.name} as {lay.describe()} on {hw.gpu_model}: the KV cache left after "
            f"the weights ({budget / 1e9:.1f} GB per GPU) cannot hold one "
            f"{w.isl}+{w.osl}-token sequence")  # fmt: skip
    want = np.ceil(c / lay.dp)
    B = np.minimum(want, max(np.floor(cap), 1.0))  # running sequences per attention rank
    moe_tok = B * lay.dp  # every rank's tokens meet in the MoE layers

    # -- per-op roofline vs kernel floor ------------------------------------------------
    floor = p.kernel_us + (0.0 if w.cuda_graphs else EAGER_LAUNCH_US)
    L, Lm, Ld = m.num_layers, m.num_moe_layers, m.num_dense_layers
    terms: dict[str, np.ndarray] = {}

    def op(name: str, nbytes, flops, fam: str, kernels: float, eff: float = 1.0) -> None:
        fmt = FORMAT_BW[(fam, _native(fam, hw))]
        roof = np.maximum(nbytes / (bw * eff * fmt), flops / (_peak(fam, hw) * p.mfu))
        terms[name] = terms.get(name, 0.0) + roof * 1e3 + kernels * floor / 1e3

    rep, shard = m.attention_params()
    att_p = L * (rep + shard / lay.tp)
    fa = family(m.bpp("attention"), wts)
    op("attention", att_p * m.bpp("attention"), 2 * B * att_p, fa,
       L * KERNELS["attention_mla" if m.attention == "mla" else "attention_gqa"])  # fmt: skip
    kv = B * kv_read_per_seq(m, np.asarray(ctx), kv_b, lay.tp)
    op("kv_cache", kv, B * m.attention_flops_per_token(ctx) / lay.tp, "bf16", 0)
    if Ld:
        dp_ = Ld * m.dense_params / lay.tp
        op("mlp", dp_ * m.bpp("dense_mlp"), 2 * B * dp_, family(m.bpp("dense_mlp"), wts),
           Ld * KERNELS["dense_mlp"])  # fmt: skip
    if Lm and m.shared_params:
        sp = Lm * m.shared_params / lay.tp
        op("mlp", sp * m.bpp("shared"), 2 * B * sp, family(m.bpp("shared"), wts),
           Lm * KERNELS["dense_mlp"])  # fmt: skip
    if Lm:
        E, k, ep = m.num_experts, m.top_k, max(lay.moe_ep, 1)
        touched = 1.0 - (1.0 - k / E) ** moe_tok
        busiest = expected_max_binomial(E // ep, touched, ep) if ep > 1 else E * touched
        ex_bytes = Lm * busiest * m.expert_bytes() / lay.moe_tensor
        ex_flops = 2 * moe_tok * k * m.expert_params * Lm / lay.gpus
        op("experts", ex_bytes, ex_flops, family(m.bpp("experts"), wts),
           Lm * KERNELS["moe"], p.moe_eff)  # fmt: skip
        # Grouped GEMM: each expert the busiest rank runs costs a tile-scheduling / scale-load
        # / tail overhead on top of its bytes, which dominates at 1-2 tokens per expert.
        terms["experts"] = terms["experts"] + Lm * busiest * p.expert_us / 1e3
    lm = m.embed_params / lay.tp
    op("lm_head", lm * m.bpp("lm_head") + B * m.vocab * 4.0 * 3, 2 * B * lm, "bf16", 4)
    terms["engine"] = np.full_like(c, p.step_ms.get(w.engine, p.step_ms["vllm"]))

    # -- prefill interference: B x I / O prompt tokens per step, compute-bound -----------
    prefill_tok = B * (w.isl / w.osl) if w.isl > 1 else np.zeros_like(c)
    t_tok = prefill_token_ms(m, hw, lay, w.isl, p)
    terms["prefill"] = prefill_tok * t_tok

    # -- collectives ---------------------------------------------------------------------
    terms["comm"] = _comm_ms(m, hw, lay, B + prefill_tok, p, comm)
    tpot = np.sum(list(terms.values()), axis=0)

    # -- TTFT: prefill of I tokens + waiting behind prompts that arrived with it -----------
    # Fixed output lengths keep a sweep's requests in step: they finish together and their
    # successors arrive together, so a prompt waits for part of its wave's other prefills
    # (burst_share of them; 1 = one synchronized wave, 0 = evenly spread arrivals).
    t_p = w.isl * t_tok
    ttft = p.ttft_fixed_ms + tpot + t_p * (1 + p.burst_share * (B - 1) / 2)
    # Closed-loop client: with C requests in flight and only B slots, a request waits for
    # (C / B - 1) requests ahead of it to finish their decode.
    waiting = np.maximum(want / B - 1.0, 0.0)
    ttft = ttft + waiting * w.osl * tpot
    served = np.minimum(c, B * lay.dp)
    out_tok_s = served * w.osl / (ttft + (w.osl - 1) * tpot) * 1e3
    return Prediction(c, tpot, ttft, out_tok_s, B, float(cap), held / 1e9, terms)


def prefill_token_ms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, isl: int,
                     p: ServingParams) -> float:  # fmt: skip
    """Milliseconds of one GPU's compute per prompt token (GEMMs + causal attention)."""
    rep, shard = m.attention_params()
    wts = m.native.weights
    parts = [
        (m.num_layers * (rep + shard / lay.tp), m.bpp("attention")),
        (m.num_dense_layers * m.dense_params / lay.tp, m.bpp("dense_mlp")),
        (m.num_moe_layers * m.shared_params / lay.tp, m.bpp("shared")),
        (m.num_moe_layers * m.top_k * m.expert_params / lay.tp, m.bpp("experts")),
        (m.embed_params / lay.tp, m.bpp("lm_head")),
    ]
    ms = sum(2 * n / (_peak(family(b, wts), hw) * p.mfu) for n, b in parts if n)
    attn = m.attention_flops_per_token(isl / 2.0) / lay.tp
    return float(ms + attn / (hw.bf16_tflops * 1e12 * p.mfu)) * 1e3


def _comm_ms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, tokens: np.ndarray,
             p: ServingParams, comm: MeasuredCurves | None) -> np.ndarray:  # fmt: skip
    act = dtype_bytes(m.native.communication)
    alpha = hw.link_latency_us or _DEFAULT_ALPHA_US.get(hw.interconnect, 27.0)
    link = hw.link_gbps * 1e9 * p.link_eff

    def lat(opname: str, n: int, nbytes: np.ndarray) -> np.ndarray:
        if comm is not None and comm.measured(opname, n):
            return comm.latency_us(opname, n, nbytes)
        factor = 2 * (n - 1) / n if opname == "all_reduce" else (n - 1) / n
        return alpha + nbytes * factor / link * 1e6

    out = np.zeros_like(tokens, dtype=float)
    if lay.tp > 1:
        calls = 2 * m.num_layers + 1
        out = out + calls * lat("all_reduce", lay.tp, tokens * m.hidden * act)
    if lay.dp > 1 and m.num_moe_layers:
        total = tokens * lay.dp * m.hidden * act
        n = lay.gpus
        out = out + m.num_moe_layers * (lat("all_gather", n, total)
                                        + lat("reduce_scatter", n, total))  # fmt: skip
    return out * p.comm_scale / 1e3
