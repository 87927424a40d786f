"""The serving model over the Tradeoff page's layouts: one curve per layout with its band.

Maps each planner.layouts.Layout to the instance it launches (planner.serving.ServeLayout):
``tp`` / ``tp_fast_allreduce`` -> TP=n; ``tp_ep_dp1`` -> TP=n with EP=n MoE; ``dp_attn_ep`` ->
attention DP=n with EP=n; ``tp_dp`` -> dp replicas of TP=k, each serving C / dp; a downcast
layout -> its base with FP8 KV where that is what it changes. Layouts no engine launches at
DP=1 (SGLang's DeepEP TP-attention estimate) get no serving curve, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError
from planner.hardware import HardwareSpec
from planner.layouts import Layout
from planner.models import ModelSpec
from planner.serving import MeasuredCurves, ServeLayout, Workload, predict
from planner.serving_params import ACCURACY, FITTED, ServingParams


@dataclass
class ServingCurve:
    layout: str
    concurrency: np.ndarray
    tpot_ms: np.ndarray | None = None
    ttft_ms: np.ndarray | None = None
    output_tok_s: np.ndarray | None = None
    low_ms: np.ndarray | None = None  # band: where the measured TPOT is expected (80%)
    high_ms: np.ndarray | None = None
    why_not: str = ""


def to_serve(lay: Layout, n: int) -> tuple[ServeLayout, int, str] | None:
    """(instance layout, replicas, KV dtype) for a Tradeoff layout, or None."""
    kind = lay.model_kind
    kv = lay.kv_dtype or ""
    if kind in ("tp", "tp_fast_allreduce"):
        return ServeLayout(tp=lay.tp, moe_tp=lay.tp), 1, kv
    if kind == "tp_ep_dp1":
        return ServeLayout(tp=lay.tp, moe_tp=1, moe_ep=lay.tp), 1, kv
    if kind == "dp_attn_ep":
        return ServeLayout(tp=1, dp=n, moe_tp=1, moe_ep=n), 1, kv
    if kind == "tp_dp":
        return ServeLayout(tp=lay.tp, moe_tp=lay.tp), lay.dp, kv
    return None


def serving_curves(
    model: ModelSpec, hw: HardwareSpec, layouts: list[Layout], isl: int, osl: int,
    concurrency: np.ndarray, comm_curves: list | None = None, engine: str = "vllm",
    params: ServingParams = FITTED,
) -> list[ServingCurve]:  # fmt: skip
    conc = np.asarray(concurrency, dtype=float)
    comm = MeasuredCurves(comm_curves or [])
    out: list[ServingCurve] = []
    for lay in layouts:
        mapped = to_serve(lay, hw.gpu_count)
        if mapped is None:
            out.append(ServingCurve(lay.name, conc, why_not="no engine launches this layout "
                                    "at DP=1 (an estimate of the write-up)"))  # fmt: skip
            continue
        inst, replicas, kv = mapped
        try:
            pr = predict(model, hw, inst, Workload(isl, osl, engine, kv),
                         np.ceil(conc / replicas), params, comm)  # fmt: skip
        except PlannerInputError as exc:
            out.append(ServingCurve(lay.name, conc, why_not=str(exc)))
            continue
        out.append(ServingCurve(
            lay.name, conc, pr.tpot_ms, pr.ttft_ms, pr.output_tok_s * replicas,
            pr.tpot_ms / (1 + ACCURACY["q90"]), pr.tpot_ms / (1 + ACCURACY["q10"]),
        ))  # fmt: skip
    return out


def serving_json(curves: list[ServingCurve], report: list[int]) -> list[dict]:
    """The curves at the report concurrencies, as the CLI's JSON / text print them."""
    out = []
    for c in curves:
        item: dict = {"layout": c.layout, "why_not": c.why_not, "points": []}
        if c.tpot_ms is not None:
            for conc in report:
                i = int(np.searchsorted(c.concurrency, conc))
                if i >= len(c.concurrency) or c.concurrency[i] != conc:
                    continue
                item["points"].append({
                    "concurrency": int(conc), "tpot_ms": round(float(c.tpot_ms[i]), 3),
                    "tpot_low_ms": round(float(c.low_ms[i]), 3),
                    "tpot_high_ms": round(float(c.high_ms[i]), 3),
                    "ttft_ms": round(float(c.ttft_ms[i]), 2),
                    "output_tok_s": round(float(c.output_tok_s[i]), 1),
                })  # fmt: skip
        out.append(item)
    return out
