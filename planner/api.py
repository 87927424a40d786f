"""The one entry point the Tradeoff page, the CLI and other tools call: ``plan(...)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.comm import CommCurve, CommSet, published_for
from planner.costmodel import (
    TERMS,
    Assumptions,
    Calibration,
    LayoutCurve,
    apply_factors,
    calibration_factors,
    evaluate,
)
from planner.errors import PlannerInputError
from planner.findings import findings
from planner.hardware import HardwareSpec
from planner.layouts import Layout, default_layouts
from planner.models import ModelSpec
from planner.policy import Policy, UnknownDtype, Violation, check_precision, load_policy
from planner.recommend import (
    Crossover,
    PolicyCost,
    Range,
    best_index,
    crossovers,
    policy_costs,
    ranges,
)

MAX_CONCURRENCY = 4096
REPORT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Assumption:
    what: str
    value: str
    source: str


@dataclass
class LayoutResult:
    layout: Layout
    compliant: bool
    violations: list[Violation]
    curve: LayoutCurve
    calibrated: LayoutCurve | None = None

    def view(self, calibrated: bool = False) -> LayoutCurve:
        return self.calibrated if calibrated and self.calibrated is not None else self.curve


@dataclass
class PlanResult:
    model: ModelSpec
    hardware: HardwareSpec
    policy: Policy
    concurrency: np.ndarray
    layouts: list[LayoutResult]
    recommended: list[Range]
    crossovers: list[Crossover]
    policy_costs: list[PolicyCost]
    assumptions: list[Assumption]
    findings: list[str] = field(default_factory=list)
    calibration: Calibration | None = None
    calibration_factors: dict[str, float] = field(default_factory=dict)
    recommended_calibrated: list[Range] = field(default_factory=list)
    comm_sources: list[str] = field(default_factory=list)

    def layout(self, name_or_kind: str) -> LayoutResult:
        for r in self.layouts:
            if name_or_kind in (r.layout.name, r.layout.kind):
                return r
        raise KeyError(name_or_kind)

    def best_at(self, c: int, calibrated: bool = False) -> str | None:
        curves = [r.view(calibrated) for r in self.layouts]
        j = curves[0].at(c)
        idx = best_index(curves, [r.compliant for r in self.layouts])
        return self.layouts[idx[j]].layout.name if idx[j] >= 0 else None

    def point(self, r: LayoutResult, c: int, calibrated: bool = False) -> dict[str, Any]:
        cur = r.view(calibrated)
        j = cur.at(c)
        return {
            "concurrency": int(c),
            "tpot_ms": round(float(cur.tpot_ms[j]), 4),
            "tokens_per_s": round(float(cur.tokens_per_s[j]), 2),
            "tokens_per_s_per_gpu": round(float(cur.tokens_per_s[j]) / self.hardware.gpu_count, 2),
            "breakdown_ms": {t: round(float(cur.terms[t][j]), 4) for t in TERMS},
            "fits": bool(cur.fits[j]),
            "dummy_ranks": int(cur.dummy_ranks[j]),
        }

    def report_concurrencies(self) -> list[int]:
        grid = set(int(x) for x in self.concurrency)
        picks = [c for c in REPORT_CONCURRENCIES if c in grid]
        return picks or [int(self.concurrency[0]), int(self.concurrency[-1])]

    def to_json(self, concurrencies: list[int] | None = None) -> dict[str, Any]:
        cs = concurrencies or self.report_concurrencies()
        out_layouts = []
        for r in self.layouts:
            item = {
                "name": r.layout.name, "kind": r.layout.kind, "tp": r.layout.tp,
                "dp": r.layout.dp, "ep": r.layout.ep, "compliant": r.compliant,
                "violations": [v.rule_id for v in r.violations],
                "how": r.layout.how,
                "weights_per_gpu_gb": round(r.curve.weights_per_gpu_bytes / 1e9, 2),
                "allreduce_calls_per_step": r.curve.allreduce_calls,
                "points": [self.point(r, c) for c in cs],
            }  # fmt: skip
            if r.calibrated is not None:
                item["calibrated_points"] = [self.point(r, c, True) for c in cs]
            out_layouts.append(item)
        data: dict[str, Any] = {
            "model": self.model.name, "host": self.hardware.name,
            "gpu_count": self.hardware.gpu_count,
            "policy": self.policy.label,
            "layouts": out_layouts,
            "recommended": [{"concurrency": c, "layout": self.best_at(c)} for c in cs],
            "recommended_ranges": [vars(x) for x in self.recommended],
            "crossovers": [vars(x) for x in self.crossovers],
            "policy_costs": [vars(x) for x in self.policy_costs if x.concurrency in cs],
            "assumptions": [vars(a) for a in self.assumptions],
            "findings": self.findings,
        }  # fmt: skip
        if self.calibration is not None:
            data["recommended_calibrated"] = [
                {"concurrency": c, "layout": self.best_at(c, True)} for c in cs
            ]
            data["calibration"] = {"source": self.calibration.source,
                                   "factors": self.calibration_factors}  # fmt: skip
        return data


def _grid(concurrencies: Any) -> np.ndarray:
    if concurrencies is None:
        return np.arange(1, 513)
    try:
        arr = np.unique(np.asarray(list(concurrencies), dtype=float))
    except (TypeError, ValueError):
        raise PlannerInputError(f"concurrency: not a list of numbers ({concurrencies!r})") from None
    if arr.size == 0 or np.any(arr < 1) or np.any(arr != np.floor(arr)):
        raise PlannerInputError("concurrency: give whole numbers >= 1")
    if arr.max() > MAX_CONCURRENCY:
        raise PlannerInputError(f"concurrency: at most {MAX_CONCURRENCY}")
    return arr.astype(int)


def _comm_world(layout: Layout, n: int) -> int:
    return layout.tp if layout.model_kind in ("tp", "tp_dp", "tp_fast_allreduce") else n


def plan(
    model: ModelSpec,
    hardware: HardwareSpec,
    layouts: list[Layout] | None = None,
    concurrencies: Any = None,
    comm_curves: list[CommCurve] | None = None,
    calibration: Calibration | None = None,
    policy: Policy | None = None,
    assumptions: Assumptions | None = None,
    fill_published: bool = True,
) -> PlanResult:
    """Cost every layout over the concurrency grid, check it against the policy, rank."""
    a = assumptions or Assumptions()
    if not 0 < a.bandwidth_efficiency <= 1 or not 0 < a.memory_utilization <= 1:
        raise PlannerInputError("assumptions: efficiencies must be in (0, 1]")
    if a.context_tokens < 1:
        raise PlannerInputError("assumptions: context length must be >= 1 token")
    pol = policy or load_policy()
    conc = _grid(concurrencies)
    lays = layouts if layouts is not None else default_layouts(model, hardware)
    if not lays:
        raise PlannerInputError("layouts: none selected")
    # Measured curves first; published ones for the same GPUs fill ops nobody measured.
    curves_in = list(comm_curves or [])
    if fill_published:
        curves_in += published_for(hardware.gpu_model, hardware.gpu_count)
    sets: dict[int, CommSet] = {}
    results: list[LayoutResult] = []
    for lay in lays:
        if lay.tp * lay.dp > hardware.gpu_count:
            raise PlannerInputError(f"layout {lay.name!r} needs {lay.tp * lay.dp} GPUs, host "
                                    f"{hardware.name!r} has {hardware.gpu_count}")  # fmt: skip
        world = _comm_world(lay, hardware.gpu_count)
        comm = sets.setdefault(world, CommSet(curves_in, world, hardware.interconnect))
        try:
            violations = check_precision(model.native, lay.precision(model), pol)
        except UnknownDtype as exc:
            raise PlannerInputError(f"layout {lay.name!r}: {exc}") from None
        curve = evaluate(model, hardware, lay, conc, comm, a)
        results.append(LayoutResult(lay, not violations, violations, curve))
    compliant = [r.compliant for r in results]
    curves = [r.curve for r in results]
    res = PlanResult(
        model=model, hardware=hardware, policy=pol, concurrency=conc, layouts=results,
        recommended=ranges(curves, compliant), crossovers=crossovers(curves, compliant),
        policy_costs=policy_costs(curves, compliant), assumptions=[],
    )  # fmt: skip
    if calibration is not None:
        _calibrate(res, calibration)
    used = {c.describe(): c for s in sets.values() for c in s.used()}
    res.comm_sources = list(used)
    res.assumptions = _assumptions(res, a, list(used.values()))
    res.findings += findings(res)
    return res


def _calibrate(res: PlanResult, cal: Calibration) -> None:
    match = next((r for r in res.layouts if cal.matches(r.layout)), None)
    if match is None:
        res.findings.append(f"calibration from {cal.source} not applied: no {cal.layout_kind} "
                            f"TP={cal.tp} DP={cal.dp} layout in this plan")  # fmt: skip
        return
    factors = calibration_factors(cal, match.curve)
    for r in res.layouts:
        r.calibrated = apply_factors(r.curve, factors)
    res.calibration, res.calibration_factors = cal, {k: round(v, 4) for k, v in factors.items()}
    res.recommended_calibrated = ranges(
        [r.calibrated for r in res.layouts if r.calibrated is not None],
        [r.compliant for r in res.layouts],
    )


def _assumptions(res: PlanResult, a: Assumptions, curves: list[CommCurve]) -> list[Assumption]:
    m, hw = res.model, res.hardware
    out = [
        Assumption("model", f"{m.name}: {m.num_layers} layers ({m.num_moe_layers} MoE), hidden "
                   f"{m.hidden}, {m.num_experts} experts top-{m.top_k}, {m.attention.upper()}, "
                   f"native {m.native.weights} weights", m.source),
        Assumption("host", f"{hw.gpu_count}x {hw.gpu_model}, {hw.memory_bytes / 1e9:.0f} GB, "
                   f"{hw.mem_bandwidth_gbps:.0f} GB/s, {hw.interconnect}", hw.source),
        Assumption("context length", f"{a.context_tokens} tokens per sequence", "assumed"),
        Assumption("memory bandwidth achieved", f"{a.bandwidth_efficiency:.0%} of peak",
                   "assumed"),
        Assumption("usable GPU memory", f"{a.memory_utilization:.0%} less "
                   f"{a.reserve_bytes / 1e9:.0f} GB reserve", "assumed (vLLM default)"),
        Assumption("all-to-all ops per MoE layer", str(a.a2a_ops_per_moe_layer),
                   "dispatch + combine (the write-up's 3-3.5 ms verdict counts one)"),
        Assumption("expert routing", "uniform top-k; the busiest EP rank reads the expected "
                   "maximum of its touched experts", "assumed"),
        Assumption("policy", res.policy.label, res.policy.path or "built-in"),
    ]  # fmt: skip
    out += [Assumption(f"{c.op} latency", c.describe(), c.kind) for c in curves]
    if res.calibration is not None:
        f = res.calibration_factors
        out.append(Assumption(
            "calibration", f"compute x{f['weights']:.2f}, AllReduce x{f['allreduce']:.2f}, "
            f"all-to-all x{f['all_to_all']:.2f}", res.calibration.source))  # fmt: skip
    return out
