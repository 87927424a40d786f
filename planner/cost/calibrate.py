"""Calibrated mode: the host's own measurements make the serving model better, never worse.

One function, :func:`calibrate`, serves ``python -m planner``, ``predict``, the Tradeoff
page's calibrated view and the Serving page. From what the host measured it fits only what
the measurements identify, shrunk toward the global fit (planner.cost.calibrate_fit):

- serving sweeps (TPOT per concurrency): bandwidth, fixed costs and compute factors;
- measured TTFTs: the request path outside the GPU (HTTP, tokenizer, streaming) per engine;
- traces: the collectives' *transfer* per call (the minimum over ranks: a collective kernel
  of a rank that arrived early also times its wait for the slowest rank). A profiled step is
  slower than the service (profiler, eager launches): a trace gives proportions and call
  counts, the service's TPOT gives time, so a trace's step never sets a TPOT;
- measured comm curves enter the prediction directly (planner.cost.comm), not as factors.

It then checks itself on points it did not see: with several layouts measured, each layout
is held out in turn (fitted on the others); with one, the top block of each sweep's
concurrencies is held back. The factors are applied only where they beat the fitted model on
those held-back points, and the band drawn after calibration is their held-back error. One
concurrency leaves nothing to hold back: on a host like the fit's it is applied only where it
lies outside the fitted model's band (a point inside it cannot tell the host's level from the
model's own scatter, which on the fixture does not persist to higher concurrencies). On such a
host, what is measured holds at the measured concurrencies and fades away from them, as the
fixture's errors along one sweep correlate less the farther apart they are (nothing is
carried from ``carry_octaves`` + 0.5 octaves on: planner.cost.params.Window).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.cost import calibrate_fit as cf
from planner.cost.bands import Band, band, from_residuals, outside_fit
from planner.cost.comm import CommSet
from planner.cost.params import (
    CALIBRATION,
    CARRY_APART,
    CARRY_WEIGHT,
    FITTED,
    ServingParams,
    Window,
)
from planner.cost.serving import predict
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

SIGN_TEST_P = 0.05
MIN_BAND_POINTS = 3  # held-back points needed to draw the user's own band, or to carry over


@dataclass(frozen=True)
class Measured:
    """One measured serving point: its layout, workload and mean TPOT (ms), mean TTFT if any."""

    layout: ServeLayout
    isl: int
    osl: int
    concurrency: int
    tpot_ms: float
    engine: str = "vllm"
    ttft_ms: float | None = None
    workload: Workload | None = None  # as launched; default: the engine's defaults
    source: str = ""

    def work(self) -> Workload:
        return self.workload or Workload(self.isl, self.osl, self.engine)


@dataclass(frozen=True)
class TraceStep:
    """A profiled decode step of one layout (a stored trace or a published profile)."""

    layout: ServeLayout
    concurrency: int
    step_ms: float
    allreduce_ms: float
    allreduce_calls: float  # per step, as the trace counted them (0 = not counted)
    source: str
    transfer_us: float | None = None  # per call, the minimum over ranks (None: not measured)
    all_to_all_ms: float = 0.0
    profiled: bool = True


@dataclass
class Check:
    """How the calibration did on points it did not see."""

    kind: str  # "layouts" | "sweeps" | "concurrencies" | "none"
    held: str  # "6 points of TP=4"
    before: list[float] = field(default_factory=list)  # predicted / measured - 1, fitted model
    after: list[float] = field(default_factory=list)  # the same, calibrated
    level: list[float] = field(default_factory=list)  # each layout's own level alone
    points: list[Measured] = field(default_factory=list)  # the held-back points, in order

    @property
    def median_before(self) -> float:
        return float(np.median(np.abs(self.before))) if self.before else float("nan")

    @property
    def median_after(self) -> float:
        return float(np.median(np.abs(self.after))) if self.after else float("nan")

    @property
    def passed(self) -> bool:
        return bool(self.after) and self.median_after < self.median_before

    @property
    def carries(self) -> bool:
        """Whether the host's factors carry to layouts nobody measured: with held-out layouts
        the check is exactly that; else the factors must beat each layout's own level alone
        on the held-back points beyond chance (explain the sweep's shape, not only its level,
        which may be the layout's own)."""
        if len(self.after) < MIN_BAND_POINTS:  # too few to vouch for layouts nobody measured
            return False
        if self.kind == "layouts":
            return self.passed
        # ... and beat the layouts' own levels beyond chance: a one-sided sign test at 5%
        wins = sum(abs(a) < abs(b) for a, b in zip(self.after, self.level, strict=True))
        n = len(self.level)
        p = sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n if n else 1.0
        return self.passed and p <= SIGN_TEST_P


@dataclass
class HostCalibration:
    """The host's factors, whether they are applied, and the check that decided it."""

    params: ServingParams  # a layout nobody measured: the fit's, or the host's factors where
    # they carry (params_for), with the measured request path either way
    applied: bool
    factors: dict[str, float]
    fitted_on: str  # "12 points of TP=8"
    points: int
    check: Check
    pinned: dict[str, str]
    band: Band | None  # the held-back error, when applied and checked on enough points
    reason: str = ""  # why not applied
    notes: list[str] = field(default_factory=list)
    request_path_ms: dict[str, float] = field(default_factory=dict)  # per engine, when pinned
    fit: cf.Fit | None = None  # the factors and each measured layout's own level
    base: ServingParams = FITTED
    carries: bool = False  # the host's factors apply to layouts nobody measured
    # Without measured collectives the factors are pinned together with the measured
    # layouts' own collectives: they carry to layouts with collectives on this many GPUs or
    # more (0: to every layout).
    carry_from_world: int = 0
    # On a host like the fit's: the measured concurrencies, [lowest, highest] (None: the
    # measurements move every concurrency alike).
    window: tuple[float, float] | None = None

    def params_for(self, lay: ServeLayout) -> ServingParams:
        """What a prediction of ``lay`` uses: for a measured layout its own level and the
        host's factors (when applied); for another layout the host's factors where they
        carried over in the check, else the fitted model (with the measured request path)."""
        if self.fit is None:  # traces only: their collectives, no sweep factors
            return self.params
        own = cf.layout_key(lay) in self.fit.offsets
        carries = self.carries and collective_world(lay) >= self.carry_from_world
        if not self.applied or not (own or carries):
            return self.base.with_values(ttft_fixed_ms=self.params.ttft_fixed_ms)
        p = self.fit.params(self.base, lay if own else None)
        path = self.params.ttft_fixed_ms
        if self.window is None:
            return p.with_values(ttft_fixed_ms=path)
        lo, hi = self.window
        return p.with_values(ttft_fixed_ms=path, window=Window(
            lo, hi, self.base.with_values(ttft_fixed_ms=path)))  # fmt: skip

    def sentence(self) -> str:
        c = self.check
        checked = (f"checked on {c.held}: {c.median_before:.0%} -> {c.median_after:.0%}"
                   if c.after else "not checked: nothing to hold back")  # fmt: skip
        if not self.applied:
            return f"not applied: {self.reason} ({checked}; fitted on {self.fitted_on})"
        return f"calibrated on {self.fitted_on}; {checked}"

    def to_json(self) -> dict[str, Any]:
        c = self.check
        return {
            "applied": self.applied, "sentence": self.sentence(), "reason": self.reason,
            "factors": self.factors, "points_used": self.points, "fitted_on": self.fitted_on,
            "request_path_ms": self.request_path_ms, "carried_to_other_layouts": self.carries,
            "concurrencies_moved": window_clients(self.window) if self.window else None,
            "check": {"kind": c.kind, "held_back": c.held, "points": len(c.after),
                      "median_abs_error_before": _r(c.median_before),
                      "median_abs_error_after": _r(c.median_after),
                      "errors_before": [_r(x) for x in c.before],
                      "errors_after": [_r(x) for x in c.after]},
            "pinned": self.pinned, "notes": self.notes,
            "band": self.band.describe() if self.band else None,
        }  # fmt: skip


def _r(x: float) -> float | None:
    return round(float(x), 4) if x == x else None


PINNED_SD = 1e-3  # a factor the fit leaves where it is


def calibration_prior(hw: HardwareSpec | None, comm_measured: bool = False) -> cf.Prior:
    """The factors' prior on this host: the fixture's spreads (fitting.calibration), every
    sweep factor wide where the host is unlike every fitted one (its own measurements then
    decide); the collectives stay put where comm curves or a trace measured them."""
    c = CALIBRATION
    outside = c["outside_prior_sd"] if outside_fit(hw) else 0.0
    sd = []
    for f in cf.FACTORS:
        if f == "collectives" and comm_measured:
            sd.append(PINNED_SD)
        else:
            sd.append(max(c["prior_sd"][f], outside))
    return cf.Prior(tuple(sd), c["layout_sd"], c["point_sd"])


def collective_world(lay: ServeLayout) -> int:
    """GPUs a layout's collectives span: TP's AllReduce, or every GPU of an attention-DP
    instance (its MoE exchange); 1 = none."""
    return lay.gpus if lay.dp > 1 else lay.tp


def _comm_measured(pts: list[Measured], traces: list[TraceStep], comm: CommSet | None) -> bool:
    """Whether the collectives of the measured layouts rest on measured or published curves
    (or a trace's per-call transfer): then a sweep does not refit them."""
    if any(t.transfer_us for t in traces):
        return True
    tps = {m.layout.tp for m in pts if m.layout.tp > 1}
    return comm is not None and bool(tps) and all(
        comm.kind("all_reduce", tp) in ("measured", "published") for tp in tps)


def describe_points(pts: list[Measured]) -> str:
    """ "12 points of TP=8" / "18 points of TP=8, TP=4"."""
    names = list(dict.fromkeys(m.layout.describe() for m in pts))
    return f"{len(pts)} point{'s' if len(pts) != 1 else ''} of {', '.join(names)}"


def calibrate(model: ModelSpec, hw: HardwareSpec, points: list[Measured],
              traces: list[TraceStep] | None = None, comm: CommSet | None = None,
              base: ServingParams = FITTED) -> HostCalibration:  # fmt: skip
    """The host's calibration from its measured points and traces (see the module doc)."""
    pts = [m for m in points if m.tpot_ms > 0 and m.concurrency >= 1]
    if not pts and not traces:
        raise PlannerInputError("calibration: no measured points with a TPOT")
    comm_measured = _comm_measured(pts, traces or [], comm)
    prior = calibration_prior(hw, comm_measured)
    notes: list[str] = []
    window = None  # on a host outside the fit's, the measurements move every concurrency
    base, trace_notes, comm_factor = _collectives(model, hw, traces or [], base, comm)
    notes += trace_notes
    if not pts:
        return _traces_only(base, comm_factor, traces or [], notes)
    check = _check(model, hw, pts, base, prior, comm)
    whole = cf.fit(model, hw, _points(pts), base, prior, comm)
    params = whole.params(base)
    factors = cf.factors(base, whole.theta)
    factors["collectives"] = round(factors["collectives"] * comm_factor, 4)
    pinned = cf.pinned(whole, prior, len(pts))
    pinned.update(_comm_pinned(pts, traces or [], comm, pinned["collectives"]))
    outside = bool(outside_fit(hw))
    applied = check.passed
    reason = "" if applied else "it did not beat the fitted model on your held-back points"
    if check.kind == "none":
        notes.append("one concurrency of one layout: nothing to hold back, so the factors are "
                     "unchecked; the band stays the fitted model's")  # fmt: skip
        inside = None if outside else _inside_band(model, hw, pts, base, comm)
        applied, reason = inside is None, inside or ""
    if applied and not outside:  # what is measured moves the concurrencies near it
        concs = sorted({m.concurrency for m in pts})
        window = (concs[0], concs[-1])
        notes.append(_window_note(concs))
    # One unchecked point: on a host like the fit's, one layout's level carries over poorly
    # (docs/calibration.md), so it pins its own layout; on a host the fit never saw, it is
    # the best there is for every layout.
    carries = applied and (check.carries or (check.kind == "none" and outside))
    # Two or more collective sizes measured tell fixed costs from collectives (and the
    # held-out-layout check has tested the carry); one size pins only their sum.
    worlds = {collective_world(m.layout) for m in pts}
    world = 0 if comm_measured or len(worlds - {1}) >= 2 else max(worlds)
    if carries and world > 1:
        notes.append(f"collectives not measured: the factors are pinned together with those "
                     f"of the measured layouts, so they carry only to layouts with collectives "
                     f"on {world} GPUs or more; python -m collectors comm --ops all_reduce "
                     "measures them")  # fmt: skip
    if applied and not carries:
        notes.append("layouts you did not measure keep the fitted model: " + (
            "one unchecked point on a host like the fit's pins only its own layout"
            if check.kind == "none" else "the factors beat it on your held-back points only "
            "together with your layout's own level, or not beyond chance"))  # fmt: skip
    params, path, below = _request_path(model, hw, pts, params if carries else base, comm)
    notes += [f"{e}: the measured TTFT is {-d:.0f} ms below the model's own prefill, so the "
              "request path is set to 0 ms and the model's TTFT stays above yours on this host "
              "(its prefill, not the request path, is what is off)" for e, d in below.items()]
    if path:
        pinned["request path"] = "pinned by the measured TTFT(s): " + ", ".join(
            f"{e} {v:.0f} ms" for e, v in path.items())  # fmt: skip
    else:
        pinned["request path"] = "not pinned: no TTFT measured"
    band = (from_residuals(check.after, f"your held-back points ({check.held})")
            if applied and len(check.after) >= MIN_BAND_POINTS else None)  # fmt: skip
    return HostCalibration(params, applied, factors,
                           describe_points(pts), len(pts), check, pinned, band, reason, notes,
                           path, whole, base, carries, world, window)  # fmt: skip


def window_clients(window: tuple[float, float]) -> list[int]:
    """[lowest, highest] whole concurrency the measured ``window`` moves at all."""
    k = 2.0 ** CARRY_APART[-1]
    return [math.floor(window[0] / k) + 1, math.ceil(window[1] * k) - 1]


def _window_note(concs: list[int]) -> str:
    low, high = window_clients((concs[0], concs[-1]))
    near = ", ".join(f"{r:.2f}" for r in CARRY_WEIGHT[1:-1])
    cut = int(CARRY_APART[-1])
    far = CALIBRATION["carry_correlation"].get(str(cut))
    why = f" (r = {far:.2f})" if far is not None else ""
    what = (f"your one concurrency ({concs[0]}) moves the concurrencies near it"
            if len(concs) == 1 else
            f"your concurrencies {concs[0]}-{concs[-1]} move the concurrencies near them")  # fmt: skip
    return (f"{what}, {low}-{high}, less the farther they are: by the fixture's correlation "
            f"of the model's errors 1-{cut - 1} octaves apart along one sweep ({near}); from "
            f"{cut} octaves on{why} the fitted model stays; measure one there to move them")  # fmt: skip


def _inside_band(model: ModelSpec, hw: HardwareSpec, pts: list[Measured], base: ServingParams,
                 comm: CommSet | None) -> str | None:  # fmt: skip
    """Why one unchecked concurrency is not applied: it lies inside the fitted model's band
    for its engine and format (None: outside it, or the model cannot run it)."""
    err = float(np.median(np.expm1(cf.log_errors(model, hw, _points(pts), base, comm))))
    if err != err:
        return None
    b = band(pts[0].engine, model, "tpot", hw)
    if not b.q10 <= err <= b.q90:
        return None
    lo, hi = b.measured()
    return (f"your one concurrency ({pts[0].concurrency}) is {1 / (1 + err) - 1:+.0%} against "
            f"the fitted model, inside its band for {b.key} ({lo:+.0%} to {hi:+.0%}): one point "
            "cannot tell this host's level from the model's own scatter, which does not persist "
            "to other concurrencies; measure a second concurrency and the check holds the top "
            "one back")  # fmt: skip


def _points(pts: list[Measured]) -> list[cf.Point]:
    return [cf.Point(m.layout, m.work(), m.concurrency, m.tpot_ms) for m in pts]


def _splits(pts: list[Measured]) -> tuple[str, list[tuple[list[int], list[int]]]]:
    """Held-back splits, most telling first: each layout in turn; else each sweep (workload)
    in turn; else the top third of the sweep's concurrencies."""
    every = range(len(pts))
    for kind, key in (("layouts", lambda m: m.layout), ("sweeps", lambda m: m.work())):
        values = list(dict.fromkeys(key(m) for m in pts))
        if len(values) >= 2:
            return kind, [([i for i in every if key(pts[i]) != v],
                           [i for i in every if key(pts[i]) == v]) for v in values]  # fmt: skip
    concs = sorted({m.concurrency for m in pts})
    if len(concs) < 2:
        return "none", []
    top = concs[-max(1, round(len(concs) / 3)):]
    return "concurrencies", [([i for i in every if pts[i].concurrency not in top],
                              [i for i in every if pts[i].concurrency in top])]  # fmt: skip


def _check(model: ModelSpec, hw: HardwareSpec, pts: list[Measured], base: ServingParams,
           prior: cf.Prior, comm: CommSet | None) -> Check:  # fmt: skip
    """Fit without the held-back points and predict them as the calibration would be applied:
    on a host like the fit's, fading away from the concurrencies it was fitted on."""
    kind, splits = _splits(pts)
    windowed = not outside_fit(hw)
    if kind == "none":
        return Check("none", "")
    before, after, levels, held_all = [], [], [], []
    for fit_idx, held_idx in splits:
        sub = _points([pts[i] for i in fit_idx])
        held = _points([pts[i] for i in held_idx])
        try:
            f = cf.fit(model, hw, sub, base, prior, comm)
        except PlannerInputError:  # the model runs none of the other layouts
            continue
        b = cf.log_errors(model, hw, held, base, comm)
        a = np.full(len(held), np.nan)
        concs = [x.concurrency for x in sub]
        window = Window(min(concs), max(concs), base) if windowed else None
        for key in {cf.layout_key(x.layout) for x in held}:
            idx = [i for i, x in enumerate(held) if cf.layout_key(x.layout) == key]
            p = f.params(base, held[idx[0]].layout).with_values(window=window)
            a[idx] = cf.log_errors(model, hw, [held[i] for i in idx], p, comm)
        # the layouts' own levels alone (no host factors): log error less the level
        level = cf.level_offsets(sub, cf.log_errors(model, hw, sub, base, comm), prior)
        c = b - np.array([level.get(cf.layout_key(x.layout), 0.0) for x in held])
        ok = np.isfinite(a) & np.isfinite(b)
        before += list(np.expm1(b[ok]))
        after += list(np.expm1(a[ok]))
        levels += list(np.expm1(c[ok]))
        held_all += [pts[i] for i, good in zip(held_idx, ok, strict=True) if good]
    what = describe_points(held_all) if held_all else "no point the model can run"
    if kind == "concurrencies" and held_all:
        concs = sorted({m.concurrency for m in held_all})
        what += f" (concurrency {concs[0]}" + (f"-{concs[-1]})" if len(concs) > 1 else ")")
    return Check(kind, what, before, after, levels, held_all)


def _comm_pinned(pts: list[Measured], traces: list[TraceStep], comm: CommSet | None,
                 fitted: str) -> dict[str, str]:  # fmt: skip
    curves = [c for c in (comm.used() if comm else []) if c.kind in ("measured", "published")]
    if any(t.transfer_us for t in traces):
        return {"collectives": "pinned by the trace's per-call transfer (minimum over ranks)"}
    if curves:
        return {"collectives": "from comm curves of these GPUs: " + "; ".join(
            f"{c.op} ({c.world_size} GPUs) {c.kind}" for c in curves)}  # fmt: skip
    sizes = sorted({m.layout.tp for m in pts})
    return {"collectives": f"{fitted}; no comm curve of this host ({'one TP size' if len(sizes) == 1 else 'TP sizes'} "
            f"{', '.join(map(str, sizes))} measured; python -m collectors comm --ops "
            "all_reduce measures them)"}  # fmt: skip


def _request_path(model: ModelSpec, hw: HardwareSpec, pts: list[Measured], p: ServingParams,
                  comm: CommSet | None
                  ) -> tuple[ServingParams, dict[str, float], dict[str, float]]:  # fmt: skip
    """The per-engine request path from measured TTFTs: at each sweep's lowest concurrency
    (least queueing) the measured minus the predicted TTFT, median over sweeps. Also, per
    engine, how far a measured TTFT falls below the model's prefill (path clamped at 0)."""
    lowest: dict[tuple, Measured] = {}
    for m in pts:
        if m.ttft_ms and m.ttft_ms > 0:
            key = (m.layout, m.work())
            if key not in lowest or m.concurrency < lowest[key].concurrency:
                lowest[key] = m
    deltas: dict[str, list[float]] = {}
    for m in lowest.values():
        try:
            pr = predict(model, hw, m.layout, m.work(), np.array([m.concurrency]), p, comm)
        except PlannerInputError:
            continue
        deltas.setdefault(m.engine, []).append(float(m.ttft_ms - pr.ttft_ms[0]))
    if not deltas:
        return p, {}, {}
    raw = {e: p.ttft_fixed_ms.get(e, p.ttft_fixed_ms["vllm"]) + float(np.median(d))
           for e, d in deltas.items()}  # fmt: skip
    path = {e: max(v, 0.0) for e, v in raw.items()}
    below = {e: v for e, v in raw.items() if v < 0}
    return p.with_values(ttft_fixed_ms={**p.ttft_fixed_ms, **path}), {
        e: round(v, 1) for e, v in path.items()}, below


def _collectives(model: ModelSpec, hw: HardwareSpec, traces: list[TraceStep],
                 base: ServingParams, comm: CommSet | None
                 ) -> tuple[ServingParams, list[str], float]:  # fmt: skip
    """The AllReduce a service pays, from a trace: the transfer per call (minimum over ranks)
    over the model's per call; the rest of the traced time is waiting and profiler."""
    notes, factor = [], 1.0
    for t in traces:
        try:
            pr = predict(model, hw, t.layout, Workload(1024, 1024), np.array([t.concurrency]),
                         base, comm)  # fmt: skip
        except PlannerInputError as exc:
            notes.append(f"{t.source}: not used ({exc})")
            continue
        calls = t.allreduce_calls or pr.allreduce_calls
        if not calls or t.allreduce_ms <= 0 or not pr.allreduce_calls:
            continue
        model_us = float(pr.breakdown_ms["allreduce"][0]) / pr.allreduce_calls * 1e3
        traced_us = t.allreduce_ms / calls * 1e3
        transfer = t.transfer_us if t.transfer_us else model_us
        if t.transfer_us:
            factor = t.transfer_us / model_us
        how = "minimum over ranks" if t.transfer_us else "the collective curve's latency"
        notes.append(
            f"{t.source}: AllReduce {traced_us:.0f} us a call in the profiled step = "
            f"{transfer:.0f} us transfer ({how}) + {max(traced_us - transfer, 0):.0f} us "
            f"waiting for the slowest rank and profiler; the service pays the transfer "
            f"({calls:.0f} calls traced, {pr.allreduce_calls} in the model)")  # fmt: skip
    return base.with_values(allreduce_scale=base.allreduce_scale * factor), notes, factor


def _traces_only(base: ServingParams, comm_factor: float, traces: list[TraceStep],
                 notes: list[str]) -> HostCalibration:  # fmt: skip
    """A trace without a service TPOT: its proportions (the collectives' transfer) only."""
    notes.append("no service TPOT of this host: the traced step's time is not used (a "
                 "profiled step is slower than the service); measure one with python -m "
                 "collectors vllm-bench")  # fmt: skip
    applied = comm_factor != 1.0
    return HostCalibration(
        base, applied, {"collectives": round(comm_factor, 4)}, "traces only", 0,
        Check("none", ""), {"collectives": "pinned by the trace's per-call transfer" if applied
                            else "not pinned: the trace has no per-rank transfer"},
        None, "" if applied else "a trace alone gives no time", notes)  # fmt: skip
