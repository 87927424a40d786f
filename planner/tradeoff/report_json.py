"""A plan as the ``--json`` contract of ``python -m planner`` (and the page's CSV columns)."""

from __future__ import annotations

from typing import Any

from planner.tradeoff.engine_commands import commands
from planner.tradeoff.recommend import call_at
from planner.tradeoff.types import TERMS, LayoutResult, PlanResult


def _r(x: float, nd: int = 4) -> float | None:
    return round(float(x), nd) if x == x else None  # NaN -> null


def point(res: PlanResult, r: LayoutResult, c: int, calibrated: bool = False) -> dict[str, Any]:
    cur = r.view(calibrated)
    j = cur.at(c)
    return {
        "concurrency": int(c),
        "tpot_ms": _r(cur.tpot_ms[j]), "tpot_ms_low": _r(cur.low_ms[j]),
        "tpot_ms_high": _r(cur.high_ms[j]),
        "ttft_ms": _r(cur.ttft_ms[j], 2), "ttft_ms_low": _r(cur.ttft_low_ms[j], 2),
        "ttft_ms_high": _r(cur.ttft_high_ms[j], 2),
        "tokens_per_s": _r(cur.tokens_per_s[j], 2),
        "tokens_per_s_per_gpu": _r(cur.tokens_per_s[j] / res.hardware.gpu_count, 2),
        "breakdown_ms": {t: _r(cur.terms[t][j]) for t in TERMS},
        "fits": bool(cur.fits[j]),
        "dummy_ranks": int(cur.dummy_ranks[j]) if len(cur.dummy_ranks) else 0,
        "percentiles": {k: {q: _r(v[j], 3) for q, v in d.items()}
                        for k, d in cur.percentiles.items()},
        **({"running_mean": _r(cur.running_mean[j], 2), "queued_mean": _r(cur.queued_mean[j], 2)}
           if len(cur.running_mean) else {}),
    }  # fmt: skip


def predict_command(r: LayoutResult, target: str) -> str:
    """``python -m planner predict`` for this layout; ``target`` names model and host."""
    return " ".join(["python -m planner predict", target, *r.curve.predict_args])


def layout_commands(r: LayoutResult, model: str = "MODEL",
                    token_budget: int = 0) -> list[dict[str, str]]:  # fmt: skip
    lay = r.layout
    return [vars(c) for c in commands(lay.model_kind if lay.kind == "downcast" else lay.kind,
                                      lay.tp, lay.dp, lay.ep, model, lay.a2a_backend,
                                      token_budget=token_budget)]  # fmt: skip


def result_commands(res: PlanResult, name: str) -> list[dict[str, str]]:
    """A plan layout's launch and measure commands, at the plan's launched token budget."""
    return layout_commands(res.layout(name), token_budget=res.token_budget)


def recommendation(res: PlanResult, c: int, calibrated: bool = False) -> dict[str, Any]:
    call = call_at(res, c, calibrated)
    item: dict[str, Any] = {"concurrency": call.concurrency, "layout": call.layout,
                            "tpot_ms": _r(call.tpot_ms), "tpot_ms_low": _r(call.tpot_ms_low),
                            "tpot_ms_high": _r(call.tpot_ms_high),
                            "too_close_to_call": list(call.too_close)}  # fmt: skip
    if call.too_close:
        names = [call.layout, *call.too_close]
        item["commands"] = {n: result_commands(res, n) for n in names if n}
    return item


def to_json(res: PlanResult, concurrencies: list[int] | None = None,
            target: str = "--model MODEL --host HOST") -> dict[str, Any]:  # fmt: skip
    cs = concurrencies or res.report_concurrencies()
    out_layouts = []
    for r in res.layouts:
        item = {
            "name": r.layout.name, "kind": r.layout.kind, "tp": r.layout.tp,
            "dp": r.layout.dp, "ep": r.layout.ep, "engine": r.curve.engine,
            "compliant": r.compliant, "violations": [v.rule_id for v in r.violations],
            "hypothesis": r.hypothesis,
            "unmeasured": [vars(c) for c in r.unmeasured], "measure_commands": r.measure,
            "collectives": [vars(c) for c in r.collectives],
            "how": r.layout.how, "why_not": r.curve.why_not,
            "predict": predict_command(r, target),
            "weights_per_gpu_gb": _r(r.curve.weights_per_gpu_bytes / 1e9, 2),
            "allreduce_calls_per_step": r.curve.allreduce_calls,
            "points": [point(res, r, c) for c in cs],
        }  # fmt: skip
        if r.calibrated is not None:
            item["calibrated_points"] = [point(res, r, c, True) for c in cs]
        out_layouts.append(item)
    head = res.headline
    data: dict[str, Any] = {
        "model": res.model.name, "host": res.hardware.name,
        "gpu_count": res.hardware.gpu_count, "engine": res.engine,
        "isl": res.isl, "osl": res.osl, "policy": res.policy.label,
        "layouts": out_layouts,
        "headline": vars(head) if head else None,
        "recommended": [recommendation(res, c) for c in cs],
        "recommended_ranges": [vars(x) for x in res.recommended],
        "hypotheses": [r.layout.name for r in res.layouts if r.compliant and r.hypothesis],
        "crossovers": [vars(x) for x in res.crossovers],
        "policy_costs": [vars(x) for x in res.policy_costs if x.concurrency in cs],
        "assumptions": [vars(a) for a in res.assumptions],
        "findings": res.findings,
    }  # fmt: skip
    if res.expert_load is not None:
        data["expert_load"] = {
            "run_id": res.expert_load.run_id, "source": res.expert_load.describe(),
            "placement": res.expert_load.placement,
            "effects": [{**vars(e), "balanced_win_ms": round(e.balanced_win_ms, 4)}
                        for e in res.placement_effects],
        }  # fmt: skip
    if res.calibration is not None:
        data["recommended_calibrated"] = [recommendation(res, c, True) for c in cs]
        data["calibration"] = res.calibration.to_json()
    return data
