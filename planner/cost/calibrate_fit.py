"""The arithmetic of calibrated mode: a host's factors from its measured TPOTs, shrunk toward
the global fit (planner.cost.calibrate orchestrates and checks them).

Each factor scales one group of the global parameters (planner.cost.params) on this host:

- ``bandwidth``: the achieved memory bandwidth (weights, KV cache, experts), never above the
  spec sheet's; a sweep's slope over concurrency (KV reads, experts touched) pins it;
- ``fixed``: the per-kernel floor and the per-expert overhead, the step's intercept;
- ``compute``: the achieved tensor throughput (prefill, compute-bound decode), which only
  points where the model puts compute on the step's critical path can pin.

The fit is a maximum a posteriori estimate on log(predicted / measured): a Gauss-Newton
solve of the points' squared log errors plus a prior that keeps each factor near 1 (the
global fit). Points of one layout share an error the factors cannot carry to other layouts
(the layout's own kernels, collectives at its world size): their errors are weighted as
correlated, so twenty points of one layout pull little more than its level does. The prior
and the two spreads come from the fixture (``python -m fitting --calibration --write``,
planner/cost/fitted.json ``calibration``); a host class the fit never saw gets a wide prior:
its own measurements decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.params import ServingParams
from planner.cost.serving import predict
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

FACTORS = ("bandwidth", "fixed", "compute", "collectives")
STEP = 1e-3  # log step of the numerical Jacobian
ITERATIONS = 12


@dataclass(frozen=True)
class Prior:
    """How far a host's factors stray from the global fit, and how the points' errors spread."""

    sd: tuple[float, ...]  # per factor (FACTORS order), log scale
    layout_sd: float  # an error one layout's points share
    point_sd: float  # each point's own


@dataclass(frozen=True)
class Point:
    """One measured TPOT (ms) at a concurrency, of one layout and workload as launched."""

    layout: ServeLayout
    workload: Workload
    concurrency: int
    tpot_ms: float


def scaled(p: ServingParams, theta: np.ndarray) -> ServingParams:
    """The global parameters with the host's factors exp(theta) applied."""
    b, f, c, a = np.exp(np.asarray(theta, dtype=float))
    return p.with_values(
        bw_eff=min(p.bw_eff * b, 1.0), kernel_us=p.kernel_us * f, expert_us=p.expert_us * f,
        mfu=p.mfu * c, moe_mfu=p.moe_mfu * c, allreduce_scale=p.allreduce_scale * a,
        a2a_scale=p.a2a_scale * a,
    )  # fmt: skip


def factors(p: ServingParams, theta: np.ndarray) -> dict[str, float]:
    """The factors as multipliers (bandwidth as applied, after the spec-sheet cap)."""
    q = scaled(p, theta)
    return {"bandwidth": round(q.bw_eff / p.bw_eff, 4), "fixed": round(q.kernel_us / p.kernel_us, 4),
            "compute": round(q.mfu / p.mfu, 4),
            "collectives": round(q.allreduce_scale / p.allreduce_scale, 4)}  # fmt: skip


def log_errors(m: ModelSpec, hw: HardwareSpec, pts: list[Point], p: ServingParams,
               comm: CommSet | None) -> np.ndarray:  # fmt: skip
    """log(predicted / measured) per point (NaN where the model cannot run the layout)."""
    out = np.full(len(pts), np.nan)
    groups: dict[tuple, list[int]] = {}
    for i, x in enumerate(pts):
        groups.setdefault((x.layout, x.workload), []).append(i)
    for (lay, w), idx in groups.items():
        conc = np.array([pts[i].concurrency for i in idx], dtype=float)
        try:
            pr = predict(m, hw, lay, w, conc, p, comm)
        except PlannerInputError:
            continue
        meas = np.array([pts[i].tpot_ms for i in idx])
        out[idx] = np.log(pr.tpot_ms / meas)
    return out


def _weights(pts: list[Point], prior: Prior) -> np.ndarray:
    """Inverse covariance of the points' log errors: independent noise plus one shared error
    per layout (Sherman-Morrison per block)."""
    n = len(pts)
    sp2, sl2 = prior.point_sd**2, prior.layout_sd**2
    w = np.eye(n) / sp2
    blocks: dict[tuple, list[int]] = {}
    for i, x in enumerate(pts):
        blocks.setdefault(layout_key(x.layout), []).append(i)
    for idx in blocks.values():
        k = len(idx)
        w[np.ix_(idx, idx)] -= sl2 / (sp2 * (sp2 + k * sl2))
    return w


def layout_key(lay: ServeLayout) -> tuple:
    """A layout as measured and as planned (ServeLayout's moe_tp may be 0 for "the rest")."""
    return (lay.tp, lay.dp, lay.moe_tensor, lay.moe_ep, lay.a2a, lay.allreduce)


@dataclass(frozen=True)
class Fit:
    theta: np.ndarray  # log factors (FACTORS order)
    posterior_sd: np.ndarray
    correlation: np.ndarray  # posterior correlation between factors
    sensitivity: np.ndarray  # mean |d log TPOT / d log factor| over the points
    at_ceiling: bool = False  # bandwidth at the spec sheet's: the points wanted more
    # Per measured layout (layout_key): its own level, log(predicted / measured) the host's
    # factors leave, shrunk by how much of a layout's level its points can pin (BLUP).
    offsets: dict[tuple, float] = field(default_factory=dict)
    # Whether a layout's own level scales its collectives too: not where comm curves or a
    # trace measured them (the level is then the layout's kernels, and an EP comparison must
    # move only the AllReduce time the service pays).
    level_on_collectives: bool = True

    def params(self, base: ServingParams, lay: ServeLayout | None = None) -> ServingParams:
        """The host's factors; for a measured layout, its own level too."""
        p = scaled(base, self.theta)
        u = self.offsets.get(layout_key(lay), 0.0) if lay is not None else 0.0
        if not u:
            return p
        k = math.exp(-u)
        if not self.level_on_collectives:
            return p.with_values(compute_scale=p.compute_scale * k)
        return p.with_values(compute_scale=p.compute_scale * k,
                             allreduce_scale=p.allreduce_scale * k, a2a_scale=p.a2a_scale * k)  # fmt: skip


def fit(m: ModelSpec, hw: HardwareSpec, pts: list[Point], base: ServingParams, prior: Prior,
        comm: CommSet | None = None) -> Fit:  # fmt: skip
    """Gauss-Newton MAP estimate of the log factors from ``pts``."""
    k = len(FACTORS)
    theta = np.zeros(k)
    p_inv = np.diag(1.0 / np.square(prior.sd))
    cap = math.log(1.0 / base.bw_eff)  # no GPU streams more than its spec bandwidth
    r = log_errors(m, hw, pts, base, comm)
    ok = np.isfinite(r)
    use = [x for x, good in zip(pts, ok, strict=True) if good]
    if not use:
        raise PlannerInputError("calibration: the model cannot run any measured layout")
    w = _weights(use, prior)
    h = p_inv
    jac = np.zeros((len(use), k))
    for _ in range(ITERATIONS):
        r = log_errors(m, hw, use, scaled(base, theta), comm)
        for j in range(k):
            d = np.zeros(k)
            d[j] = -STEP if j == 0 and theta[0] > cap - STEP else STEP  # at the ceiling
            jac[:, j] = (log_errors(m, hw, use, scaled(base, theta + d), comm) - r) / d[j]
        jac = np.nan_to_num(jac)
        h = jac.T @ w @ jac + p_inv
        step = np.linalg.solve(h, jac.T @ w @ r + p_inv @ theta)
        theta = theta - step
        theta[0] = min(theta[0], cap)
        if np.abs(step).max() < 1e-4:
            break
    r = log_errors(m, hw, use, scaled(base, theta), comm)
    cov = np.linalg.inv(h)
    sd = np.sqrt(np.diag(cov))
    return Fit(theta, sd, cov / np.outer(sd, sd), np.abs(jac).mean(axis=0),
               bool(theta[0] >= cap - 1e-9), level_offsets(use, r, prior),
               prior.sd[FACTORS.index("collectives")] > HELD)  # fmt: skip


def level_offsets(pts: list[Point], r: np.ndarray, prior: Prior) -> dict[tuple, float]:
    """Each measured layout's level the host's factors leave (residuals ``r``), shrunk: n
    points of one layout pin sl^2 / (sl^2 + sp^2 / n) of their mean."""
    sp2, sl2 = prior.point_sd**2, prior.layout_sd**2
    by: dict[tuple, list[float]] = {}
    for x, e in zip(pts, r, strict=True):
        if np.isfinite(e):
            by.setdefault(layout_key(x.layout), []).append(float(e))
    return {k: sum(v) * sl2 / (sp2 + len(v) * sl2) for k, v in by.items()}


HELD = 2e-3  # a prior this narrow holds the factor at the global fit's value
HELD_WHY = {
    "bandwidth": "held at the fit's: on a host like the fit's one layout's sweep slope does not "
                 "carry to other layouts",
    "compute": "held at the fit's: on a host like the fit's a compute factor fitted on one "
               "layout moves the others the wrong way (prefill interference differs by layout)",
    "collectives": "held: measured by comm curves or a trace",
}


def pinned(f: Fit, prior: Prior, points: int) -> dict[str, str]:
    """Per factor: what the measured points could tell about it, in words."""
    out: dict[str, str] = {}
    free = [j for j in range(len(FACTORS)) if prior.sd[j] > HELD]
    for j, name in enumerate(FACTORS):
        ratio = f.posterior_sd[j] / prior.sd[j]
        partners = [i for i in free if i != j]
        partner = max(partners, key=lambda i: abs(f.correlation[j, i])) if partners else j
        if j not in free:
            out[name] = HELD_WHY.get(name, "held at the fit's")
        elif j == 0 and f.at_ceiling:
            out[name] = ("at the spec sheet's bandwidth: the points ask for more, so the other "
                         "terms took the rest")  # fmt: skip
        elif f.sensitivity[j] < 0.02:
            out[name] = "not pinned: the measured points do not exercise it"
        elif points == 1 and len(free) > 1:
            out[name] = "not pinned apart: one point fixes only the step's total, split by the prior"
        elif partner != j and abs(f.correlation[j, partner]) > 0.8:
            out[name] = (f"not pinned apart from {FACTORS[partner]}: the points fix only "
                         "their combination")  # fmt: skip
        elif ratio < 0.5:
            out[name] = f"pinned (uncertainty {ratio:.0%} of the prior's)"
        else:
            out[name] = f"weakly pinned (uncertainty {ratio:.0%} of the prior's)"
    return out
