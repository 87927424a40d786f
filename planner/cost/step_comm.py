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


def step_comm(m: ModelSpec, lay: ServeLayout, w: Workload, tokens: np.ndarray,
              comm: CommSet, allreduce_scale: float = 1.0,
              a2a_scale: float = 1.0) -> StepComm:  # fmt: skip
    """Collective time per step; ``tokens`` = tokens one attention rank runs in the step."""
    act = dtype_bytes(m.native.communication)
    h, Lm, n = m.hidden, m.num_moe_layers, lay.gpus
    calls = allreduce_calls(m, lay)
    ops: list[tuple[str, int]] = []
    ar = np.zeros_like(tokens, dtype=float)
    if calls:
        ops.append((lay.allreduce, lay.tp))
        ar = calls * comm.latency_us(lay.allreduce, lay.tp, tokens * h * act) / 1e3
    a2a = np.zeros_like(tokens, dtype=float)
    kind = exchange(m, lay)
    if kind == "allgather_reducescatter":
        total = tokens * lay.dp * h * act
        ops += [("all_gather", n), ("reduce_scatter", n)]
        a2a = Lm * (comm.latency_us("all_gather", n, total)
                    + comm.latency_us("reduce_scatter", n, total)) / 1e3  # fmt: skip
    elif kind == "dispatch_combine":
        # Each rank sends its tokens' hidden states to every destination (the write-up's
        # "14,336 B per destination" at 1 token); under TP attention the ranks split the
        # step's tokens.
        per_rank = np.maximum(np.ceil(tokens / lay.tp), 1.0)
        disp = dtype_bytes(w.a2a_dtype or m.native.dispatch or m.native.communication)
        comb = dtype_bytes(w.a2a_dtype or m.native.communication)
        ops.append(("all_to_all", n))
        a2a = Lm * (comm.latency_us("all_to_all", n, per_rank * h * disp)
                    + comm.latency_us("all_to_all", n, per_rank * h * comb)) / 1e3  # fmt: skip
    return StepComm(ar * allreduce_scale, a2a * a2a_scale, calls, ops)


def prefill_comm(m: ModelSpec, lay: ServeLayout, w: Workload, chunk: float, comm: CommSet,
                 one: StepComm, allreduce_scale: float = 1.0,
                 a2a_scale: float = 1.0) -> tuple[float, float]:  # fmt: skip
    """Collective milliseconds one prompt token adds to a step of ``chunk`` prompt tokens,
    beyond ``one``, the 1-token step's (whose latency the step's fixed part holds).

    Returns (on the token's own rank: its TP group's AllReduces, or its dispatch and combine;
    per busy attention rank: the AllGather + ReduceScatter that carries every rank's tokens).
    Prompt activations cross the same collectives as decode tokens, a chunk's worth at a time:
    Kimi-K2.5 at TP8 over PCIe: 2 x 61 + 1 AllReduces of 8,192 x 7,168 x 2 bytes, about 0.65 s
    per 8,192-token prompt.
    """
    big = step_comm(m, lay, w, np.array([1.0 + chunk]), comm, allreduce_scale, a2a_scale)
    ar = float(big.allreduce_ms[0] - one.allreduce_ms[0]) / chunk
    ex = float(big.all_to_all_ms[0] - one.all_to_all_ms[0]) / chunk
    if exchange(m, lay) == "allgather_reducescatter":
        return ar, ex / lay.dp  # step_comm counted every rank's chunk; per rank's share
    return ar + ex, 0.0
