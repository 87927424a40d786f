"""The serving model's mean TPOT and TTFT, priced the way the fit needs them: thousands of
times over the same schedules (planner.cost.serving.predict gives the same numbers).

Each concurrency's schedule (planner.sched) is reduced to a few aggregated step shapes per
mean (planner.sched.metrics.reduced: the means are linear in the steps' times), and their
unit-efficiency basis (planner.cost.step_basis) is priced again for each candidate set of
fitted values; :class:`MeanStack` prices many workloads in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.params import FITTED, ServingParams
from planner.cost.serving import SHAPE_FIELDS, check, kv_capacity, lengths_priced, schedule
from planner.cost.step import step_basis, step_ms
from planner.cost.step_basis import StepBasis
from planner.cost.types import ServeLayout, Workload
from planner.sched.metrics import Shapes, reduced, segment_weights
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

__all__ = ["MeanPlan", "MeanStack", "mean_latencies", "mean_plan"]


@dataclass
class MeanPlan:
    """A workload's schedules at its concurrencies, reduced to a few step shapes per mean
    (planner.sched.metrics.reduced) and those steps' basis (planner.cost.step_basis): priced
    again for each new set of fitted parameters."""

    basis: StepBasis
    weights: np.ndarray
    owner: np.ndarray  # 2 x concurrency index + (0: TPOT, 1: TTFT)
    points: int
    engine: str

    def evaluate(self, p: ServingParams = FITTED) -> tuple[np.ndarray, np.ndarray]:
        t = step_ms(self.basis.terms(p))
        sums = np.bincount(self.owner, self.weights * t, 2 * self.points)
        fixed_ms = p.ttft_fixed_ms.get(self.engine, p.ttft_fixed_ms["vllm"])
        return sums[0::2], sums[1::2] + fixed_ms


@dataclass
class MeanStack:
    """Many :class:`MeanPlan` evaluated together: one basis over all their step shapes."""

    plans: list[MeanPlan]

    def __post_init__(self) -> None:
        self.basis = StepBasis.concat([q.basis for q in self.plans])
        self.weights = np.concatenate([q.weights for q in self.plans])
        starts = np.cumsum([0] + [2 * q.points for q in self.plans])
        self.owner = np.concatenate([q.owner + o for q, o in zip(self.plans, starts, strict=False)])
        self.starts = starts

    def evaluate(self, p: ServingParams = FITTED) -> list[tuple[np.ndarray, np.ndarray]]:
        t = step_ms(self.basis.terms(p))
        sums = np.bincount(self.owner, self.weights * t, int(self.starts[-1]))
        out = []
        for q, lo in zip(self.plans, self.starts, strict=False):
            part = sums[lo:lo + 2 * q.points]
            fixed_ms = p.ttft_fixed_ms.get(q.engine, p.ttft_fixed_ms["vllm"])
            out.append((part[0::2], part[1::2] + fixed_ms))
        return out


def mean_plan(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, conc: np.ndarray,
              p: ServingParams = FITTED, comm: CommSet | None = None) -> MeanPlan:  # fmt: skip
    """The :class:`MeanPlan` of a workload (one line when the model cannot run it)."""
    check(m, hw, lay, w)
    comm = comm if comm is not None else CommSet([], hw, p.link_eff)
    _, cap = kv_capacity(m, hw, lay, w, p)
    shapes: list[Shapes] = []
    weights: list[np.ndarray] = []
    owner: list[np.ndarray] = []
    for i, x in enumerate(np.asarray(conc, dtype=float)):
        s = schedule(m, hw, lay, w, cap, int(x))
        if not s.reduced:
            seg = segment_weights(s)
            s.reduced.update({k: reduced(s, seg[k]) for k in ("tpot", "ttft")})
        for j, k in enumerate(("tpot", "ttft")):
            sh, wt = s.reduced[k]
            shapes.append(sh)
            weights.append(wt)
            owner.append(np.full(wt.size, 2 * i + j))
    basis = step_basis(m, hw, lay, lengths_priced(w), comm,
                       Shapes(*(np.concatenate([getattr(x, f) for x in shapes])
                                for f in SHAPE_FIELDS)))  # fmt: skip
    return MeanPlan(basis, np.concatenate(weights), np.concatenate(owner), len(conc), w.engine)


def mean_latencies(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
                   conc: np.ndarray, p: ServingParams = FITTED,
                   comm: CommSet | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Mean TPOT and TTFT at each concurrency, as :func:`predict` gives them (the same
    schedules and step prices) from each schedule's segments aggregated into a few shapes
    per mean: what the fit evaluates thousands of times (:class:`MeanPlan`)."""
    return mean_plan(m, hw, lay, w, conc, p, comm).evaluate(p)
