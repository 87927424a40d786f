"""Calibrated mode: per-host factors fitted from measured serving points of a model on a host.

The global parameters (planner.serving_params) carry over between GPUs through spec sheets;
a stored ``vllm-bench`` sweep (or trace) of this model on this host pins what the spec sheet
cannot say. Two factors, fitted on log TPOT error (a grid search: deterministic, no scipy):

- ``bandwidth``: scales the achieved memory bandwidth (HBM vs GDDR, clocks, ECC);
- ``fixed``: scales the per-kernel floor, per-expert overhead and engine step (driver, CPU,
  kernels the engine picks on this GPU).

Measured communication per step (from a trace: ``trace_comm_sources`` totals over the run's
steps, e.g. MoE AllReduce and attention AllReduce us/step) replaces the modelled collectives
when given: ``comm_scale`` = measured / modelled at the traced concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.errors import PlannerInputError
from planner.hardware import HardwareSpec
from planner.models import ModelSpec
from planner.serving import ServeLayout, Workload, predict
from planner.serving_params import FITTED, ServingParams

GRID = np.exp(np.linspace(np.log(0.33), np.log(3.0), 25))  # factor search range, per axis


@dataclass(frozen=True)
class Measured:
    """One measured point: the layout and workload it ran, and its mean TPOT (ms)."""

    layout: ServeLayout
    isl: int
    osl: int
    concurrency: int
    tpot_ms: float
    engine: str = "vllm"


@dataclass(frozen=True)
class MeasuredComm:
    """Collectives per decode step from a trace (us per step), at the traced concurrency."""

    layout: ServeLayout
    concurrency: int
    isl: int
    osl: int
    moe_allreduce_us: float = 0.0
    attention_allreduce_us: float = 0.0
    other_us: float = 0.0

    @property
    def total_ms(self) -> float:
        return (self.moe_allreduce_us + self.attention_allreduce_us + self.other_us) / 1e3


@dataclass
class Calibrated:
    params: ServingParams
    factors: dict[str, float]
    error_before: list[float]  # predicted / measured - 1, per point, global parameters
    error_after: list[float]  # the same with the host's factors
    notes: list[str] = field(default_factory=list)

    @staticmethod
    def _med(e: list[float]) -> float:
        return float(np.median(np.abs(e))) if e else float("nan")

    @property
    def median_before(self) -> float:
        return self._med(self.error_before)

    @property
    def median_after(self) -> float:
        return self._med(self.error_after)

    def sentence(self) -> str:
        f = self.factors
        return (f"calibrated on {len(self.error_after)} measured point(s): bandwidth "
                f"x{f['bandwidth']:.2f}, fixed costs x{f['fixed']:.2f}, collectives "
                f"x{f['comm']:.2f}; median |TPOT error| {self.median_before:.0%} -> "
                f"{self.median_after:.0%}")  # fmt: skip


def scaled(p: ServingParams, bandwidth: float, fixed: float, comm: float) -> ServingParams:
    return p.with_values(
        bw_eff=p.bw_eff * bandwidth, kernel_us=p.kernel_us * fixed,
        expert_us=p.expert_us * fixed, comm_scale=p.comm_scale * comm,
        step_ms={k: v * fixed for k, v in p.step_ms.items()},
    )  # fmt: skip


def _errors(model: ModelSpec, hw: HardwareSpec, pts: list[Measured], p: ServingParams) -> list:
    groups: dict[tuple, list[Measured]] = {}
    for m in pts:
        groups.setdefault((m.layout, m.isl, m.osl, m.engine), []).append(m)
    out: list[float] = []
    for (lay, isl, osl, eng), g in groups.items():
        pr = predict(model, hw, lay, Workload(isl, osl, eng),
                     np.array([m.concurrency for m in g]), p)  # fmt: skip
        out += [float(pr.tpot_ms[i] / m.tpot_ms - 1) for i, m in enumerate(g)]
    return out


def calibrate(
    model: ModelSpec, hw: HardwareSpec, points: list[Measured],
    comm: list[MeasuredComm] | None = None, base: ServingParams = FITTED,
) -> Calibrated:  # fmt: skip
    """Per-host factors from measured points (and measured collectives, when given)."""
    pts = [m for m in points if m.tpot_ms > 0 and m.concurrency >= 1]
    if not pts:
        raise PlannerInputError("calibration: no measured points with a TPOT")
    comm_factor, notes = 1.0, []
    for c in comm or []:
        pr = predict(model, hw, c.layout, Workload(c.isl, c.osl), np.array([c.concurrency]), base)
        modelled = float(pr.breakdown_ms["comm"][0])
        if modelled > 0 and c.total_ms > 0:
            comm_factor = c.total_ms / modelled
            notes.append(f"collectives: traced {c.total_ms:.2f} ms/step vs modelled "
                         f"{modelled:.2f} ms at concurrency {c.concurrency}")  # fmt: skip
    before = _errors(model, hw, pts, base)
    best, best_loss = (1.0, 1.0), np.inf
    # One point cannot tell the two factors apart: then only the fixed costs move.
    bw_grid = [b for b in GRID if base.bw_eff * b <= 1.0] if len(pts) >= 2 else [1.0]
    for b in bw_grid:  # no GPU streams more than its spec bandwidth
        for f in GRID:
            e = _errors(model, hw, pts, scaled(base, b, f, comm_factor))
            loss = float(np.mean(np.abs(np.log1p(e))))
            if loss < best_loss:
                best, best_loss = (b, f), loss
    p = scaled(base, best[0], best[1], comm_factor)
    factors = {"bandwidth": round(best[0], 3), "fixed": round(best[1], 3),
               "comm": round(comm_factor, 3)}  # fmt: skip
    return Calibrated(p, factors, before, _errors(model, hw, pts, p), notes)
