"""Calibrated mode: per-host factors for the one serving model, from this host's measurements.

The global parameters (planner.cost.params) carry over between GPUs through spec sheets;
a stored ``vllm-bench`` sweep (or trace) of this model on this host pins what the spec sheet
cannot say. Two factors, fitted on log TPOT error (a grid search: deterministic, no scipy):

- ``bandwidth``: scales the achieved memory bandwidth (HBM vs GDDR, clocks, ECC);
- ``fixed``: scales the per-kernel floor, per-expert overhead and engine step (driver, CPU,
  kernels the engine picks on this GPU).

Measured communication per step (from a trace: ``trace_comm_sources`` totals over the run's
steps, e.g. MoE AllReduce and attention AllReduce us/step) replaces the modelled collectives
when given: the collectives' scale = measured / modelled at the traced concurrency.

A measured (or published) decode step of one layout (:class:`Calibration`, the Tradeoff
page's trace runs and the reference case) gives three factors the same way: compute (every
non-collective term), AllReduce (per call when the trace counted its calls) and all-to-all,
each measured / modelled at the traced concurrency; every layout then uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.cost.params import FITTED, ServingParams
from planner.cost.serving import ServeLayout, Workload, predict
from planner.errors import PlannerInputError
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

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
        expert_us=p.expert_us * fixed, allreduce_scale=p.allreduce_scale * comm,
        a2a_scale=p.a2a_scale * comm,
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
        modelled = float(pr.breakdown_ms["allreduce"][0] + pr.breakdown_ms["all_to_all"][0])
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


# ---- a measured decode step of one layout (trace or published) ------------------------
COMM_KEYS = ("allreduce", "all_to_all")


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
    # From the trace's step anatomy (store.queries.planner.trace_allreduce_anatomy):
    allreduce_calls: float | None = None  # measured AllReduce calls per step

    def matches(self, kind: str, tp: int, dp: int) -> bool:
        return (kind, tp, dp) == (self.layout_kind, self.tp, self.dp)


def step_factors(cal: Calibration, terms: dict[str, np.ndarray], calls: int,
                 i: int) -> dict[str, float]:  # fmt: skip
    """compute / allreduce / all_to_all factors so the model reproduces the measured step
    at grid point i of the matching layout's terms.

    With a measured AllReduce call count, the AllReduce term is scaled per call (measured
    time per call over the model's), so calls the model does not have (a trace's extra
    AllReduces) stay in the compute share instead of inflating every layout's per-call
    latency; layouts that drop the MoE AllReduce then drop it at its measured cost.
    """
    comm = dict(cal.comm_ms)
    if cal.allreduce_calls and calls and "allreduce" in comm:
        comm["allreduce"] = comm["allreduce"] / cal.allreduce_calls * calls
    compute_model = sum(float(v[i]) for k, v in terms.items() if k not in COMM_KEYS)
    compute_meas = cal.step_ms - sum(comm.values())
    out = {"compute": 1.0, "allreduce": 1.0, "all_to_all": 1.0}
    if compute_model > 0 and compute_meas > 0:
        out["compute"] = compute_meas / compute_model
    for k in COMM_KEYS:
        model_ms = float(terms[k][i])
        if k in comm and comm[k] > 0 and model_ms > 0:
            out[k] = comm[k] / model_ms
    return out


def with_step_factors(p: ServingParams, f: dict[str, float]) -> ServingParams:
    return p.with_values(compute_scale=p.compute_scale * f["compute"],
                         allreduce_scale=p.allreduce_scale * f["allreduce"],
                         a2a_scale=p.a2a_scale * f["all_to_all"])  # fmt: skip
