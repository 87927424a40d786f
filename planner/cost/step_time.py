"""How long one engine step of a given shape takes on this host: the serving model's one price
of a step, for whatever the scheduler put in it (planner.sched decides that).

A step of shape (decoding requests B and their mean context on the busiest attention rank,
decode tokens of every rank, prompt tokens T on the busiest rank and of every rank) costs:

- its decode ops at B (planner.cost.step.decode_terms: weights, KV reads at that context, the
  experts the ranks' decode tokens touch, per-kernel floors); a step without decoding
  requests (SGLang's prefill batch, the first wave) still streams the weights once: it is
  priced at one sequence;
- its prompt tokens' compute (planner.cost.step.prefill_cost): attention, dense and shared
  MLP and LM head for the busiest rank's T, the routed experts of every rank's prompts
  spread over the MoE group;
- its collectives (planner.cost.step_comm) for the tokens it carries: TP AllReduces of the
  busiest rank's B + T, the MoE exchange of every rank's tokens.

The terms are those of a TPOT breakdown (planner.cost.serving.TERMS); a step with prompt
tokens but no decode files its decode ops under "prefill" too.
"""

from __future__ import annotations

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.params import ServingParams
from planner.cost.step import decode_basis, prefill_cost_unit
from planner.cost.step_basis import StepBasis
from planner.cost.step_comm import exchange, step_comm
from planner.cost.types import ServeLayout, Workload
from planner.sched.metrics import Shapes
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec


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
