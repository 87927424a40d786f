"""Decode-step cost per layout, vectorised over concurrency (numpy, one pass per layout).

A decode step on the busiest GPU = weight bytes read (non-expert weights plus the routed
experts the step's tokens touch: E x (1 - (1 - k/E)^T)) over achievable memory bandwidth
(or FLOPs over peak if that is larger), + the extra experts the busiest GPU holds under EP
(expected maximum of a binomial over the EP ranks), + KV-cache reads, + AllReduce calls,
+ all-to-all (dispatch/combine or AllGather/ReduceScatter). Idle attention-DP ranks run a
1-token dummy pass that takes part in the collectives and the expert reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from planner.comm import CommSet
from planner.hardware import HardwareSpec
from planner.layouts import Layout
from planner.models import ModelSpec, dtype_bytes

TERMS = ("weights", "expert_imbalance", "kv_cache", "allreduce", "all_to_all")
COMPUTE_TERMS = ("weights", "expert_imbalance", "kv_cache")
COMM_TERMS = ("allreduce", "all_to_all")


@dataclass(frozen=True)
class Assumptions:
    """Knobs of the model; every one is listed with the plan's assumptions."""

    context_tokens: int = 2048  # mean tokens in each sequence's KV cache during decode
    bandwidth_efficiency: float = 0.9  # achievable fraction of peak memory bandwidth
    memory_utilization: float = 0.9  # vLLM --gpu-memory-utilization default
    reserve_bytes: float = 2e9  # activations, CUDA graphs, NCCL buffers per GPU
    a2a_ops_per_moe_layer: int = 2  # dispatch + combine (the write-up's verdict counts 1)


@dataclass
class LayoutCurve:
    layout: Layout
    concurrency: np.ndarray
    terms: dict[str, np.ndarray]
    fits: np.ndarray
    weights_per_gpu_bytes: float
    kv_capacity_tokens: float
    dummy_ranks: np.ndarray
    allreduce_calls: int
    calibrated: bool = False
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tpot_ms: np.ndarray = np.sum([self.terms[t] for t in TERMS], axis=0)

    @property
    def tokens_per_s(self) -> np.ndarray:
        return self.concurrency / self.tpot_ms * 1e3

    def at(self, c: int) -> int:
        return int(np.searchsorted(self.concurrency, c))


_EMAX_CACHE: dict[tuple, np.ndarray] = {}


def expected_max_binomial(n: int, p: np.ndarray, groups: int) -> np.ndarray:
    """E[max of `groups` iid Binomial(n, p)]: the busiest EP rank's touched experts."""
    p = np.asarray(p, dtype=float)
    key = (n, groups, p.tobytes())
    if key not in _EMAX_CACHE:
        if len(_EMAX_CACHE) > 64:
            _EMAX_CACHE.clear()
        _EMAX_CACHE[key] = _emax(n, p, groups)
    return _EMAX_CACHE[key]


def _emax(n: int, p: np.ndarray, groups: int) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    q = 1.0 - p
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        pmf = q**n
        cdf = pmf.copy()
        out = np.zeros_like(p)
        odds = np.where(q > 0, p / np.where(q > 0, q, 1.0), 0.0)
        for j in range(n):
            out += 1.0 - cdf**groups
            pmf = pmf * (n - j) / (j + 1) * odds
            cdf = np.minimum(cdf + pmf, 1.0)
    return np.where(q <= 1e-12, float(n), out)


def evaluate(
    model: ModelSpec, hw: HardwareSpec, layout: Layout, conc: np.ndarray, comm: CommSet,
    a: Assumptions,
) -> LayoutCurve:  # fmt: skip
    c = np.asarray(conc, dtype=float)
    n, kind = hw.gpu_count, layout.model_kind
    bw = hw.mem_bandwidth_gbps * 1e9 * a.bandwidth_efficiency  # bytes/s
    act = layout.activations or model.native.activations
    peak = hw.tflops(act) * 1e12
    h, L, Lm, Ld = model.hidden, model.num_layers, model.num_moe_layers, model.num_dense_layers
    E, k = model.num_experts, model.top_k
    dummy = np.zeros_like(c)
    if kind == "dp_attn_ep":
        t = 1
        per_rank = np.ceil(c / n)
        tokens_ne = np.maximum(per_rank, 1.0)  # idle ranks run a 1-token dummy pass
        tokens_moe = n * tokens_ne
        seqs = per_rank
        dummy = np.maximum(n - c, 0.0)
    else:
        t = layout.tp
        replicas = layout.dp if kind in ("tp", "tp_dp", "tp_fast_allreduce") else 1
        tokens_ne = tokens_moe = seqs = np.ceil(c / replicas)
        per_rank = np.ceil(c / n)

    # -- weights read per step on one GPU --------------------------------------------
    rep, shard = model.attention_params()
    ne_params = (
        L * (rep + shard / t)
        + (Ld * model.dense_params + Lm * model.shared_params + model.embed_params) / t
    )
    ne_bytes = (
        L * (rep + shard / t) * model.bpp("attention")
        + Ld * model.dense_params / t * model.bpp("dense_mlp")
        + Lm * model.shared_params / t * model.bpp("shared")
        + model.embed_params / t * model.bpp("lm_head")
    )  # fmt: skip
    ep = layout.uses_ep and E > 0 and n > 1
    expert_b = model.expert_bytes()
    if E:
        touched = 1.0 - (1.0 - k / E) ** tokens_moe  # P(an expert is hit this step)
        if ep:
            per_gpu = E / n * touched
            busiest = expected_max_binomial(E // n, touched, n)
            ex_bytes, imb_bytes = Lm * per_gpu * expert_b, Lm * (busiest - per_gpu) * expert_b
            ex_flops = 2 * tokens_moe * k * model.expert_params * Lm / n
        else:
            ex_bytes, imb_bytes = Lm * E * touched * expert_b / t, np.zeros_like(c)
            ex_flops = 2 * tokens_moe * k * model.expert_params * Lm / t
    else:
        ex_bytes = imb_bytes = ex_flops = np.zeros_like(c)
    flops = 2 * tokens_ne * ne_params + ex_flops
    weights_ms = np.maximum((ne_bytes + ex_bytes) / bw, flops / peak) * 1e3
    imbalance_ms = imb_bytes / bw * 1e3

    # -- attention: KV-cache reads (or attention FLOPs if larger) ---------------------
    kv_dtype = layout.kv_dtype or model.native.kv_cache
    kv_tok = model.kv_bytes_per_token(kv_dtype, t)
    kv_read = seqs * a.context_tokens * kv_tok
    attn_flops = seqs * model.attention_flops_per_token(a.context_tokens) / t
    kv_ms = np.maximum(kv_read / bw, attn_flops / (hw.bf16_tflops * 1e12)) * 1e3

    # -- communication ----------------------------------------------------------------
    act_b = dtype_bytes(model.native.activations)
    calls = 0
    if kind != "dp_attn_ep" and t > 1:
        calls = L + Ld + 1 if kind == "tp_attn_ep_moe" else 2 * L + 1
    ar_ms = calls * comm.latency_us(layout.allreduce_op, tokens_ne * h * act_b) / 1e3
    a2a_ms = np.zeros_like(c)
    disp_b, comb_b = dtype_bytes(layout.dispatch(model)), dtype_bytes(layout.combine(model))
    if kind == "tp_attn_ep_moe" or (kind == "dp_attn_ep" and layout.a2a_backend != (
            "allgather_reducescatter")):  # fmt: skip
        tr = np.maximum(per_rank, 1.0)
        one = comm.latency_us("all_to_all", tr * h * disp_b)
        if a.a2a_ops_per_moe_layer >= 2:
            one = one + comm.latency_us("all_to_all", tr * h * comb_b)
        a2a_ms = Lm * one / 1e3
    elif kind == "dp_attn_ep":
        a2a_ms = Lm * (comm.latency_us("all_gather", tokens_moe * h * disp_b)
                       + comm.latency_us("reduce_scatter", tokens_moe * h * comb_b)) / 1e3  # fmt: skip

    # -- memory fit -------------------------------------------------------------------
    rep_bytes = L * rep * model.bpp("attention")
    ne_total = model.nonexpert_bytes()
    held = ne_total if kind == "dp_attn_ep" else rep_bytes + (ne_total - rep_bytes) / t
    held += model.routed_expert_bytes() / (n if ep else t)
    usable = hw.memory_bytes * a.memory_utilization - a.reserve_bytes
    kv_cap = max(usable - held, 0.0) / kv_tok
    fits = (held <= usable) & (seqs * a.context_tokens <= kv_cap)

    terms = {"weights": weights_ms, "expert_imbalance": imbalance_ms, "kv_cache": kv_ms,
             "allreduce": np.broadcast_to(ar_ms, c.shape).astype(float), "all_to_all": a2a_ms}  # fmt: skip
    return LayoutCurve(layout, np.asarray(conc), terms, np.asarray(fits), float(held),
                       float(kv_cap), dummy, int(calls))  # fmt: skip


# ---- calibration to a measured (or published) breakdown ---------------------------------
@dataclass(frozen=True)
class Calibration:
    """A measured decode-step breakdown of the same model / host / layout."""

    layout_kind: str
    tp: int
    dp: int
    concurrency: int
    step_ms: float
    comm_ms: tuple[tuple[str, float], ...]  # (allreduce | all_to_all, ms per step)
    source: str
    profiled: bool = True  # a profiler inflates the step; the page says so
    # From the trace's step anatomy (store.queries_planner.trace_allreduce_anatomy):
    allreduce_calls: float | None = None  # measured AllReduce calls per step

    def matches(self, layout: Layout) -> bool:
        return (layout.kind, layout.tp, layout.dp) == (self.layout_kind, self.tp, self.dp)


def calibration_factors(cal: Calibration, curve: LayoutCurve) -> dict[str, float]:
    """Scale factors per term so the model reproduces the measured step at its concurrency.

    With a measured AllReduce call count, the AllReduce term is scaled per call (measured
    time per call over the model's), so calls the model does not have (a trace's extra
    AllReduces) stay in the compute share instead of inflating every layout's per-call
    latency; layouts that drop the MoE AllReduce then drop it at its measured cost.
    """
    i = min(curve.at(cal.concurrency), len(curve.concurrency) - 1)
    comm = dict(cal.comm_ms)
    if cal.allreduce_calls and curve.allreduce_calls and "allreduce" in comm:
        comm["allreduce"] = comm["allreduce"] / cal.allreduce_calls * curve.allreduce_calls
    compute_model = sum(float(curve.terms[t][i]) for t in COMPUTE_TERMS)
    compute_meas = cal.step_ms - sum(comm.values())
    factors = dict.fromkeys(TERMS, 1.0)
    if compute_model > 0 and compute_meas > 0:
        for t in COMPUTE_TERMS:
            factors[t] = compute_meas / compute_model
    for t in COMM_TERMS:
        model_ms = float(curve.terms[t][i])
        if t in comm and model_ms > 0:
            factors[t] = comm[t] / model_ms
    return factors


def apply_factors(curve: LayoutCurve, factors: dict[str, float]) -> LayoutCurve:
    terms = {t: curve.terms[t] * factors.get(t, 1.0) for t in TERMS}
    return replace(curve, terms=terms, calibrated=True)  # __post_init__ re-sums the TPOT
