"""The serving model on the pages: the Tradeoff page's serving chart (each layout with the
model's measured error as a band) and the Serving page's predicted-vs-measured points
(with calibrated mode). Numbers come from planner/ and store.queries_planner; this module
formats them.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages import ui
from planner.serving_params import ACCURACY

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC", "#EECA3B")  # fmt: skip


def band_caption() -> str:
    return (f"Bands: where the measured TPOT fell for 80% of the planner's leave-one-model-out "
            f"predictions ({ACCURACY['rows']} vLLM rows on Blackwell; median |error| "
            f"{ACCURACY['median_abs']:.0%}, {ACCURACY['within_25pct']:.0%} within 25%). Other GPU "
            "generations carry over through spec-sheet numbers only.")  # fmt: skip


def tradeoff_section(model, hw, layouts, compliant: dict[str, bool], isl: int, osl: int,
                     conc: np.ndarray, comm_curves=None) -> None:  # fmt: skip
    """TPOT vs concurrency per layout from the serving model, each with its error band."""
    from planner.serving_layouts import serving_curves

    st.subheader(f"Serving prediction: {isl} in / {osl} out (vllm bench serve)")
    curves = serving_curves(model, hw, layouts, isl, osl, conc, comm_curves)
    fig = go.Figure()
    rows, missing = [], []
    for i, c in enumerate(curves):
        if c.tpot_ms is None:
            missing.append(f"{c.layout}: {c.why_not}")
            continue
        color = PALETTE[i % len(PALETTE)]
        dash = None if compliant.get(c.layout, True) else "dot"
        fig.add_scatter(x=np.r_[c.concurrency, c.concurrency[::-1]],
                        y=np.r_[c.high_ms, c.low_ms[::-1]], fill="toself", opacity=0.15,
                        line={"width": 0, "color": color}, hoverinfo="skip",
                        showlegend=False, name=f"{c.layout} band")  # fmt: skip
        fig.add_scatter(x=c.concurrency, y=c.tpot_ms, mode="lines", name=c.layout,
                        line={"color": color, "dash": dash})  # fmt: skip
        rows.append(pd.DataFrame({"layout": c.layout, "concurrency": c.concurrency,
                                  "tpot_ms": c.tpot_ms, "tpot_low_ms": c.low_ms,
                                  "tpot_high_ms": c.high_ms, "ttft_ms": c.ttft_ms,
                                  "output_tok_s": c.output_tok_s}))  # fmt: skip
    fig.update_layout(title="Predicted mean TPOT (dotted: blocked by the policy)",
                      xaxis_title="concurrency", yaxis_title="TPOT (ms)", xaxis_type="log",
                      height=420, margin={"t": 40})  # fmt: skip
    if rows:
        ui.chart(fig, pd.concat(rows, ignore_index=True), "tradeoff-serving")
    st.caption(band_caption())
    if missing:
        st.caption("No serving curve for: " + "; ".join(missing))


# ---- Serving page -----------------------------------------------------------------------
def stored_model(loc, model_id: str, host: str):
    """(ModelSpec from the config.json recorded with a run, or None, source)."""
    from planner.errors import PlannerInputError
    from planner.models import from_config, with_modelopt
    from store import queries_planner as qp

    rows = qp.model_configs(loc, model_id, host)
    if rows.empty:
        rows = qp.model_configs(loc, model_id)
    if rows.empty:
        return None, ""
    row = rows.iloc[0]
    try:
        cfg = json.loads(row["config_json"])
        if isinstance(row["quant_config_json"], str):
            cfg = with_modelopt(cfg, json.loads(row["quant_config_json"]))
        src = f"config.json recorded with run {row['run_id']} ({row['source_path']})"
        return from_config(cfg, name=model_id, source=src), src
    except (ValueError, PlannerInputError) as exc:
        return None, f"recorded config of {model_id!r} unusable ({exc})"


def _serve_layout(row: dict):
    from planner.serving import ServeLayout

    tp, dp, ep = int(row["tp"]), int(row["dp"] or 1), bool(row["ep"])
    n = tp * dp
    return ServeLayout(tp=tp, dp=dp, moe_tp=1 if ep else n, moe_ep=n if ep else 1)


def _params_that_fit(model, hw, lay, notes: list[str], what: str):
    """The fitted parameters; where the weights leave no KV room at vLLM's default 0.9
    memory utilization, 0.98 (the measured run shows the engine did load: it must have been
    launched with a higher --gpu-memory-utilization), said in a note."""
    from planner.serving import weights_per_gpu
    from planner.serving_params import FITTED

    budget = hw.memory_bytes * FITTED.memory_utilization - FITTED.reserve_gb * 1e9
    if weights_per_gpu(model, lay) < budget:
        return FITTED
    notes.append(f"{what}: weights leave no KV room at --gpu-memory-utilization 0.9; "
                 "predicted at 0.98 with a 1 GB reserve (the run shows it loaded)")  # fmt: skip
    return FITTED.with_values(memory_utilization=0.98, reserve_gb=1.0)


def serving_predictions(loc, bench: pd.DataFrame, model_id: str, hw_choice: str,
                        hardware_for, model_for) -> tuple[pd.DataFrame, list[str]]:  # fmt: skip
    """Predicted TPOT / TTFT / tokens/s at each measured (layout, host, concurrency, I/O),
    the calibrated prediction where this model has measured points on the host, and why-nots.
    Shows the calibration's error before -> after as a caption."""
    try:
        from planner.calibrate import Measured, calibrate
        from planner.errors import PlannerInputError
        from planner.serving import Workload, predict
    except ImportError as exc:
        return pd.DataFrame(), [f"the planner is not importable here ({exc})"]
    out, reasons, notes = [], [], []
    for (layout, host), part in bench.groupby(["layout_label", "host"], sort=False):
        first = part.iloc[0].to_dict()
        if pd.isna(first.get("tp")):
            reasons.append(f"{layout} on {host}: layout unknown (import with --server-args)")
            continue
        model, src = stored_model(loc, model_id, host)
        if model is None:
            model, why = model_for(model_id)
            if model is None:
                reasons.append(f"{layout} on {host}: {src or why}")
                continue
        hw, why = hardware_for(loc, hw_choice, host)
        if hw is None:
            reasons.append(f"{layout} on {host}: {why}")
            continue
        lay = _serve_layout(first)
        params = _params_that_fit(model, hw, lay, notes, f"{layout} on {host}")
        pts = part.dropna(subset=["concurrency", "mean_tpot_ms"])
        measured = [Measured(lay, max(int(round(r["input_len"] or 1)), 1),
                             max(int(round(r["output_len"] or 2)), 2), int(r["concurrency"]),
                             float(r["mean_tpot_ms"])) for r in pts.to_dict("records")]  # fmt: skip
        try:
            cal = calibrate(model, hw, measured, base=params) if measured else None
        except PlannerInputError:
            cal = None
        if cal is not None:
            notes.append(f"{layout} on {host}: {cal.sentence()}")
        for m in measured:
            try:
                w = Workload(m.isl, m.osl)
                pr = predict(model, hw, lay, w, np.array([m.concurrency]), params)
                cp = predict(model, hw, lay, w, np.array([m.concurrency]), cal.params) if cal \
                    else None  # fmt: skip
            except PlannerInputError as exc:
                reasons.append(f"{layout} on {host}: {exc}")
                break
            out.append({"layout_label": layout, "host": host, "concurrency": m.concurrency,
                        "predicted_tpot_ms": float(pr.tpot_ms[0]),
                        "predicted_ttft_ms": float(pr.ttft_ms[0]),
                        "predicted_tokens_per_s": float(pr.output_tok_s[0]),
                        "calibrated_tpot_ms": float(cp.tpot_ms[0]) if cp else None,
                        "hardware": hw.name, "hardware_source": hw.source,
                        "model_source": model.source,
                        "comm_source": "spec-sheet link latency and bandwidth"})  # fmt: skip
    if notes:
        st.caption("Calibrated mode (per-host factors fitted on these measured points): "
                   + "; ".join(notes))  # fmt: skip
    frame = pd.DataFrame(out)
    if not frame.empty:
        frame = frame.drop_duplicates(["layout_label", "host", "concurrency"])
    return frame, reasons
