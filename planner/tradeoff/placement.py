"""What a measured expert load does to a plan's EP layouts, and what balancing would win.

Each layout whose MoE runs expert-parallel is costed three ways on the same host and
workload: under uniform top-k routing (the planner's assumption without a measurement),
under the measured distribution with the experts placed as the engines place them by
default (contiguously), and under the measured distribution with an EPLB-style balanced
placement (planner.cost.expert_load). The plan itself is priced on the contiguous one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.expert_load import ExpertLoad
from planner.cost.params import ServingParams
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec
from planner.tradeoff.instances import Instance, predict_instance
from planner.tradeoff.types import Assumption, PlacementEffect


def tpots(model: ModelSpec, hw: HardwareSpec, inst: Instance, conc: np.ndarray,
          load: ExpertLoad | None, p: ServingParams, comm: CommSet) -> np.ndarray:  # fmt: skip
    """TPOT over ``conc`` of ``inst`` with its workload's expert load replaced by ``load``."""
    w = replace(inst.workload, expert_load=load)
    return predict_instance(model, replace(inst, workload=w), hw, conc, p, comm).tpot_ms


def effects(model: ModelSpec, hw: HardwareSpec, inst: Instance, name: str,
            conc: list[int], load: ExpertLoad, p: ServingParams,
            comm: CommSet) -> list[PlacementEffect]:  # fmt: skip
    """The three TPOTs of one EP layout at each concurrency of ``conc``."""
    c = np.asarray(conc, dtype=float)
    uniform = tpots(model, hw, inst, c, None, p, comm)
    contiguous = tpots(model, hw, inst, c, load.with_placement("contiguous"), p, comm)
    balanced = tpots(model, hw, inst, c, load.with_placement("balanced"), p, comm)
    return [PlacementEffect(name, int(x), float(u), float(m), float(b))
            for x, u, m, b in zip(conc, uniform, contiguous, balanced, strict=True)]  # fmt: skip


def expert_load_block(model: ModelSpec, hw: HardwareSpec, inst: Instance, conc: list[int],
                      params: ServingParams, comm: CommSet,
                      tpot: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The measured routing's effect: TPOT under uniform routing and under the other
    placement, per point; what a balanced placement would win."""
    load = inst.workload.expert_load
    c = np.asarray(conc, dtype=float)
    uniform = tpots(model, hw, inst, c, None, params, comm)
    other = "balanced" if load.placement == "contiguous" else "contiguous"
    alt = (tpots(model, hw, inst, c, load.with_placement(other), params, comm)
           if inst.serve.moe_ep > 1 else tpot)  # fmt: skip
    balanced = alt if other == "balanced" else tpot
    contiguous = tpot if other == "balanced" else alt
    return {"run_id": load.run_id, "source": load.describe(), "placement": load.placement,
            "points": [{"concurrency": int(x), "tpot_ms_uniform": round(float(u), 3),
                        "tpot_ms_contiguous": round(float(m), 3),
                        "tpot_ms_balanced": round(float(b), 3),
                        "balanced_win_ms": round(float(m - b), 3)}
                       for x, u, m, b in zip(conc, uniform, contiguous, balanced, strict=True)]}  # fmt: skip


def routing_assumption(load: ExpertLoad | None) -> Assumption:
    """The assumptions line on expert routing: uniform, or the measured distribution."""
    if load is None:
        return Assumption("expert routing", "uniform top-k; the busiest EP rank runs the "
                          "expected maximum of its touched experts", "assumed")  # fmt: skip
    return Assumption(
        "expert routing", f"measured ({load.placement} placement): each expert's share of its "
        f"layer's tokens from {load.describe()} ({len(load.routed_layers())} routed layers); "
        "the busiest EP rank runs the expected maximum over ranks of its touched experts and "
        "its measured share of the tokens", load.run_id or load.source or "measured")  # fmt: skip
