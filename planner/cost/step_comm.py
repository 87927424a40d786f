"""The collectives of one decode step, per layout and collective backend.

- TP > 1: an AllReduce after attention (o_proj) in every layer, after every dense MLP, after
  every MoE layer whose output is all-reduced, and one for the vocab-parallel embedding:
  2 x 61 + 1 = 123 for DeepSeek-V3 / Kimi-K2.5 (REFERENCE §2). vLLM at DP=1 all-reduces the
  MoE output even with --enable-expert-parallel; only a dispatch/combine backend (SGLang
  DeepEP with TP attention) drops the MoE AllReduce, leaving L + L_dense + 1.
- Attention-DP with EP: per MoE layer either AllGather + ReduceScatter of every rank's
  tokens (vLLM's default ``allgather_reducescatter``) or a dispatch and a combine
  all-to-all (DeepEP) of each rank's tokens to every destination.

Latencies come from planner.cost.comm.CommSet (measured, published, derived or spec sheet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.types import ServeLayout, Workload
from planner.specs.models import ModelSpec, dtype_bytes

A2A_BACKENDS = ("allgather_reducescatter", "deepep_low_latency", "deepep_high_throughput")


@dataclass
class StepComm:
    allreduce_ms: np.ndarray
    all_to_all_ms: np.ndarray  # dispatch + combine, or AllGather + ReduceScatter
    allreduce_calls: int
    ops: list[tuple[str, int]]  # (op, world size) this layout uses


def exchange(m: ModelSpec, lay: ServeLayout) -> str:
    """How the MoE layers exchange tokens: none (all-reduced under TP), AllGather +
    ReduceScatter, or a dispatch/combine all-to-all."""
    if not m.num_moe_layers or lay.moe_ep <= 1 or lay.gpus <= 1:
        return "allgather_reducescatter" if lay.dp > 1 and m.num_moe_layers else "none"
    if lay.a2a.startswith("deepep"):
        return "dispatch_combine"
    return "allgather_reducescatter" if lay.dp > 1 else "none"


def allreduce_calls(m: ModelSpec, lay: ServeLayout) -> int:
    if lay.tp <= 1:
        return 0
    moe_ar = m.num_moe_layers if exchange(m, lay) == "none" else 0
    return m.num_layers + m.num_dense_layers + moe_ar + 1


@dataclass(slots=True)
class Message:
    """One collective of a step: ``calls`` per step of ``op`` (a planner.cost.comm curve op) on
    ``world`` GPUs, ``nbytes`` on the curve's x axis, filed under the trace ``category``."""

    category: str
    op: str
    world: int
    nbytes: np.ndarray
    calls: int


def messages(m: ModelSpec, lay: ServeLayout, w: Workload, tokens: np.ndarray) -> list[Message]:
    """The collectives of one step; ``tokens`` = tokens one attention rank runs in the step.
    The step's collective time and the collectives' floors (planner.cost.floors) both read it."""
    act = dtype_bytes(m.native.communication)
    h, Lm, n = m.hidden, m.num_moe_layers, lay.gpus
    out: list[Message] = []
    calls = allreduce_calls(m, lay)
    if calls:
        out.append(Message("allreduce", lay.allreduce, lay.tp, tokens * h * act, calls))
    kind = exchange(m, lay)
    if kind == "allgather_reducescatter":
        total = tokens * lay.dp * h * act
        out += [Message("allgather", "all_gather", n, total, Lm),
                Message("reduce_scatter", "reduce_scatter", n, total, Lm)]  # fmt: skip
    elif kind == "dispatch_combine":
        # Each rank sends its tokens' hidden states to every destination (the write-up's
        # "14,336 B per destination" at 1 token); under TP attention the ranks split the
        # step's tokens.
        per_rank = np.maximum(np.ceil(tokens / lay.tp), 1.0)
        disp = dtype_bytes(w.a2a_dtype or m.native.dispatch or m.native.communication)
        comb = dtype_bytes(w.a2a_dtype or m.native.communication)
        out += [Message("all_to_all", "all_to_all", n, per_rank * h * disp, Lm),
                Message("all_to_all", "all_to_all", n, per_rank * h * comb, Lm)]  # fmt: skip
    return out


def step_comm(m: ModelSpec, lay: ServeLayout, w: Workload, tokens: np.ndarray,
              comm: CommSet, allreduce_scale: float = 1.0,
              a2a_scale: float = 1.0) -> StepComm:  # fmt: skip
    """Collective time per step; ``tokens`` = tokens one attention rank runs in the step."""
    ops: list[tuple[str, int]] = []
    us: dict[bool, np.ndarray] = {}  # microseconds x calls: AllReduce (True), the rest
    for msg in messages(m, lay, w, tokens):
        if (msg.op, msg.world) not in ops:
            ops.append((msg.op, msg.world))
        t = msg.calls * comm.latency_us(msg.op, msg.world, msg.nbytes)
        key = msg.category == "allreduce"
        us[key] = us[key] + t if key in us else t
    zero = np.zeros_like(tokens, dtype=float)
    ar, a2a = us.get(True, zero) / 1e3, us.get(False, zero) / 1e3
    return StepComm(ar * allreduce_scale, a2a * a2a_scale, allreduce_calls(m, lay), ops)
