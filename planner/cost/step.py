"""One decode step's compute on the busiest GPU, op by op, and one prompt token's prefill cost.

The ops and their bytes and FLOPs are planner.cost.step_ops's (the physical floors price the
same ops). Each op here is its roofline (bytes over achieved bandwidth, FLOPs over achieved
tensor peak, per weight format and GPU generation) plus its kernels' floor (kernels x per-kernel
floor under CUDA graphs; the larger-of form fits the fixture worse: 11.6% vs 10.7% median vLLM
TPOT):

- attention projections, KV-cache reads (MLA latent replicated over TP, GQA heads split by
  TP; sliding-window layers read at most the window, linear-attention layers a fixed state,
  sparse (DSA) layers the top-k plus the indexer keys), dense MLP, shared experts (their
  kernels' floors hidden behind the routed experts where the engine overlaps them);
- routed experts: the distinct experts the step's tokens touch (E x (1 - (1 - k/E)^T)); under
  EP the busiest rank holds the expected maximum of a binomial over its E / EP experts: the
  mean rank's share is ``experts``, the busiest rank's extra is ``expert_imbalance``; with a
  measured distribution (``Workload.expert_load``) both, and the busiest rank's tokens, come
  from it (planner.cost.routing.measured);
- LM head and sampling over the vocabulary.

Collectives are planner.cost.step_comm's. What a step holds is planner.sched's;
:func:`step_terms` prices it, through its unit-efficiency basis (planner.cost.step_basis, the
only place a step's time is assembled). A step of shape (decoding requests B and their mean context on the busiest attention rank,
decode tokens of every rank, prompt tokens T on the busiest rank and of every rank) costs:

- its decode ops at B (:func:`decode_basis`: weights, KV reads at that context, the
  experts the ranks' decode tokens touch, per-kernel floors); a step without decoding
  requests (SGLang's prefill batch, the first wave) still streams the weights once: it is
  priced at one sequence;
- its prompt tokens' compute (:func:`prefill_cost`): attention, dense and shared
  MLP and LM head for the busiest rank's T, the routed experts of every rank's prompts
  spread over the MoE group;
- its collectives (planner.cost.step_comm) for the tokens it carries: TP AllReduces of the
  busiest rank's B + T, the MoE exchange of every rank's tokens.

The terms are those of a TPOT breakdown (planner.cost.serving.TERMS); a step with prompt
tokens but no decode files its decode ops under "prefill" too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.params import ServingParams
from planner.cost.routing import token_factor
from planner.cost.step_basis import SLOTS, StepBasis, eager_us, op_slot, unit_roof
from planner.cost.step_comm import exchange, step_comm
from planner.cost.step_ops import (
    StepOp,
    StepShape,
    decode_ops,
    family,
    kv_layer_bytes,
    kv_read_per_seq,
    peak,
)
from planner.cost.types import ServeLayout, Workload
from planner.sched.metrics import Shapes
from planner.specs.engines import shared_overlap_tokens
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

__all__ = ["COMPUTE_TERMS", "PrefillCost", "decode_basis", "decode_terms", "family",
           "kv_read_per_seq", "kv_store_per_seq", "peak", "prefill_cost", "prefill_cost_unit",
           "step_basis", "step_ms", "step_terms", "weights_per_gpu"]  # fmt: skip

COMPUTE_TERMS = ("attention", "kv_cache", "mlp", "experts", "expert_imbalance", "lm_head")


def kv_store_per_seq(m: ModelSpec, tokens: float, b: float, tp: int) -> float:
    """KV bytes one sequence of ``tokens`` holds on one GPU (16-token blocks)."""
    per = kv_layer_bytes(m, b, tp)
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


def _joint(ops: list[StepOp]) -> list[StepOp]:
    """The ops as the prediction prices them: ops sharing a ``roof`` as one (bytes and FLOPs
    summed into the group's first op: the ops are this call's own), in execution order."""
    out: list[StepOp] = []
    first: dict[str, StepOp] = {}
    for op in ops:
        head = first.get(op.roof) if op.roof else None
        if head is None:
            if op.roof:
                first[op.roof] = op
            out.append(op)
            continue
        head.nbytes = head.nbytes + op.nbytes
        if not (isinstance(op.flops, float) and op.flops == 0.0):
            head.flops = head.flops + op.flops
        head.kernels += op.kernels
    return out


def decode_basis(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
                 B: np.ndarray, moe_tokens: np.ndarray | None = None,
                 context: np.ndarray | float | None = None) -> StepBasis:  # fmt: skip
    """The decode ops of a step with ``B`` sequences on the busiest rank, at unit
    efficiencies (planner.cost.step_basis); no prompt tokens, no collectives."""
    B = np.asarray(B, dtype=float)
    moe_tok = B * lay.dp if moe_tokens is None else moe_tokens
    ctx = w.isl + w.osl / 2.0 if context is None else context  # mean context over a decode
    shape = StepShape.decode(B, ctx, moe_tok)
    n = B.size
    zero = np.zeros((len(SLOTS), n))
    nbytes, flops, kernels, layers = zero.copy(), zero.copy(), zero.copy(), np.zeros((2, n))
    bw = hw.mem_bandwidth_gbps * 1e9
    seen: set[str] = set()
    for op in _joint(decode_ops(m, hw, lay, w, shape)):
        slot = op_slot(op)
        if slot in seen:
            raise ValueError(f"two ops in step slot {slot!r}")  # the basis prices one each
        seen.add(slot)
        if slot == "routed":
            e = op.experts
            mean, top = SLOTS.index("routed_mean"), SLOTS.index("routed_top")
            nbytes[mean], flops[mean] = unit_roof(op, bw, hw, w.activations, e.mean * e.bytes_each,
                                                  op.flops / e.token_factor)  # fmt: skip
            nbytes[top], flops[top] = unit_roof(op, bw, hw, w.activations)
            kernels[mean] = op.kernels
            layers[0], layers[1] = e.layers * e.mean, e.layers * e.busiest
        else:
            i = SLOTS.index(slot)
            nbytes[i], flops[i] = unit_roof(op, bw, hw, w.activations)
            kernels[i] = op.kernels
    none = np.zeros(n)
    return StepBasis(nbytes, flops, kernels, layers, shared_overlap_tokens(w.engine) >= B,
                     none, none, none, none, B, np.full(n, float(m.num_layers)),
                     np.zeros(n, dtype=bool), np.zeros(n, dtype=int), (w.engine,),
                     eager_us(w.cuda_graphs))  # fmt: skip


def decode_terms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
                 B: np.ndarray, p: ServingParams, moe_tokens: np.ndarray | None = None,
                 context: np.ndarray | float | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Milliseconds of each compute op of one decode step with ``B`` sequences on the busiest
    rank; ``moe_tokens``: the tokens every attention rank sends the MoE together (default
    B x DP: every rank as busy as the busiest); ``context``: each sequence's KV tokens
    (default I + O / 2, the mean over a request's decode)."""
    terms = decode_basis(m, hw, lay, w, B, moe_tokens, context).terms(p)
    return {t: terms[t] for t in COMPUTE_TERMS}


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
    compute-bound at the format's tensor peak x mfu (moe_mfu for the routed experts)."""
    unit = prefill_cost_unit(m, hw, lay, w)
    return PrefillCost(unit.attention_ms / p.mfu * p.compute_scale,
                       unit.expert_ms / p.moe_mfu * p.compute_scale)  # fmt: skip


def prefill_cost_unit(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout,
                      w: Workload) -> PrefillCost:  # fmt: skip
    """:func:`prefill_cost` at unit tensor efficiency (mfu = moe_mfu = 1, no calibration)."""
    rep, shard = m.attention_params()
    wts = m.native.weights

    def ms(n: float, bpp: float, eff: float) -> float:
        return 2 * n / (peak(family(bpp, wts), hw, w.activations) * eff) * 1e3 if n else 0.0

    attention = (ms(m.num_layers * (rep + shard / lay.tp), m.bpp("attention"), 1.0)
                 + ms(m.num_dense_layers * m.dense_params / lay.tp, m.bpp("dense_mlp"), 1.0)
                 + ms(m.num_moe_layers * m.shared_params / lay.tp, m.bpp("shared"), 1.0)
                 + ms(m.embed_params / lay.tp, m.bpp("lm_head"), 1.0))  # fmt: skip
    attn = m.attention_flops_per_token(w.isl / 2.0, prefill=True) / lay.tp
    attention += attn / (hw.bf16_tflops * 1e12) * 1e3
    group = lay.moe_tensor * max(lay.moe_ep, 1)
    experts = ms(m.num_moe_layers * m.top_k * m.expert_params / group, m.bpp("experts"), 1.0)
    if w.expert_load is not None:  # the busiest EP rank computes its measured share
        experts *= token_factor(w.expert_load, lay.moe_ep)
    return PrefillCost(attention, experts)


# ---- one step of any shape (what planner.sched puts in it) ------------------------------
def step_basis(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, comm: CommSet,
               s: Shapes) -> StepBasis:  # fmt: skip
    """Every shape's step at unit efficiencies (planner.cost.step_basis)."""
    b = np.maximum(s.batch, 1.0)
    moe = np.maximum(s.moe_tokens, 1.0)
    if lay.dp > 1:  # an idle attention rank still sends the MoE a dummy token
        moe = np.maximum(moe, float(lay.dp))
    ctx = np.where(s.batch > 0, s.context, float(w.isl))
    basis = decode_basis(m, hw, lay, w, b, moe, ctx)
    unit = prefill_cost_unit(m, hw, lay, w)
    basis.prefill_attention_ms = s.prefill_max * unit.attention_ms
    basis.prefill_expert_ms = s.prefill_sum * unit.expert_ms
    basis.prompt_only = (s.batch <= 0) & (s.prefill_max > 0)
    own = b + s.prefill_max  # tokens through the busiest rank's layers
    sc = step_comm(m, lay, w, own, comm)
    basis.allreduce_ms = sc.allreduce_ms
    if exchange(m, lay) == "allgather_reducescatter":  # every rank's tokens, gathered
        mean = np.maximum((moe + s.prefill_sum) / lay.dp, 1.0)
        basis.all_to_all_ms = step_comm(m, lay, w, mean, comm).all_to_all_ms
    else:
        basis.all_to_all_ms = sc.all_to_all_ms
    return basis


def step_terms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, p: ServingParams,
               comm: CommSet, s: Shapes) -> dict[str, np.ndarray]:  # fmt: skip
    """Milliseconds of each term of one step of each shape."""
    return step_basis(m, hw, lay, w, comm, s).terms(p)


def step_ms(terms: dict[str, np.ndarray]) -> np.ndarray:
    return np.sum(list(terms.values()), axis=0)
