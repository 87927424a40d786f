"""The serving model on the Serving page: predicted-vs-measured points (with calibrated mode),
each prediction with the model's measured-error band for its engine and weight format.
Numbers come from planner/ and store.queries.planner; this module formats them.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

ENGINES = ("vllm", "sglang", "trtllm")


def add_band(fig: go.Figure, part: pd.DataFrame, color: str, name: str) -> None:
    """The shaded band where the measured TPOT is expected (80% of held-out runs)."""
    if "predicted_tpot_low_ms" not in part or part["predicted_tpot_low_ms"].isna().all():
        return
    ok = part.dropna(subset=["predicted_tpot_low_ms"]).sort_values("concurrency")
    fig.add_scatter(x=np.r_[ok["concurrency"], ok["concurrency"][::-1]],
                    y=np.r_[ok["predicted_tpot_high_ms"], ok["predicted_tpot_low_ms"][::-1]],
                    fill="toself", opacity=0.15, line={"width": 0, "color": color},
                    hoverinfo="skip", showlegend=False, name=f"{name} band")  # fmt: skip


# ---- Serving page -----------------------------------------------------------------------
def stored_model(loc, model_id: str, host: str):
    """(ModelSpec from the config.json recorded with a run, or None, source)."""
    from planner.api import PlannerInputError, models
    from store.queries import planner as qp

    rows = qp.model_configs(loc, model_id, host)
    if rows.empty:
        rows = qp.model_configs(loc, model_id)
    if rows.empty:
        return None, ""
    row = rows.iloc[0]
    try:
        cfg = json.loads(row["config_json"])
        if isinstance(row["quant_config_json"], str):
            cfg = models.with_modelopt(cfg, json.loads(row["quant_config_json"]))
        src = f"config.json recorded with run {row['run_id']} ({row['source_path']})"
        return models.from_config(cfg, name=model_id, source=src), src
    except (ValueError, PlannerInputError) as exc:
        return None, f"recorded config of {model_id!r} unusable ({exc})"


def _serve_layout(row: dict):
    from planner.api import ServeLayout

    tp, dp, ep = int(row["tp"]), int(row["dp"] or 1), bool(row["ep"])
    n = tp * dp
    return ServeLayout(tp=tp, dp=dp, moe_tp=1 if ep else n, moe_ep=n if ep else 1)


def _engine(row: dict) -> str:
    eng = str(row.get("engine") or "vllm").lower()
    return eng if eng in ENGINES else "vllm"


def engine_column(bench: pd.DataFrame) -> list[str]:
    """Each bench row's engine as the planner names it (a row without one is vLLM's): runs of
    two engines with the same layout on one host are predicted, and matched, apart."""
    return [_engine(r) for r in bench.to_dict("records")]


def _prompts(row: dict) -> int:
    """The run's --num-prompts (its share of first-wave prompts shapes the mean TTFT); 0 when
    the result did not record it (the planner then assumes the fitted benchmark's)."""
    try:
        n = float(row.get("num_prompts"))
    except (TypeError, ValueError):
        return 0
    return int(n) if n == n and n > 0 else 0  # NaN: not recorded


def serving_predictions(loc, bench: pd.DataFrame, model_id: str, hw_choice: str,
                        hardware_for, model_for) -> tuple[pd.DataFrame, list[str]]:  # fmt: skip
    """Predicted TPOT / TTFT / tokens/s at each measured (layout, host, concurrency, I/O),
    the calibrated prediction where this model has measured points on the host, and why-nots.
    Shows the calibration's error before -> after as a caption."""
    try:
        from planner.api import (
            Measured,
            PlannerInputError,
            Workload,
            band,
            calibrate,
            params_for_loaded_run,
            predict,
            row_settings,
        )
    except ImportError as exc:
        return pd.DataFrame(), [f"the planner is not importable here ({exc})"]
    from store.queries import serving as qs

    launched = qs.bench_server_args(loc, sorted(set(bench["run_id"])))
    out, reasons, notes = [], [], []
    bench = bench.assign(engine=engine_column(bench))
    for (layout, host, engine), part in bench.groupby(["layout_label", "host", "engine"],
                                                      sort=False):  # fmt: skip
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
        params, note = params_for_loaded_run(model, hw, lay, engine)
        if note:
            notes.append(f"{layout} on {host}: {note}")
        pts = part.dropna(subset=["concurrency", "mean_tpot_ms"])
        measured = [Measured(lay, max(int(round(r["input_len"] or 1)), 1),
                             max(int(round(r["output_len"] or 2)), 2), int(r["concurrency"]),
                             float(r["mean_tpot_ms"]), engine)
                    for r in pts.to_dict("records")]  # fmt: skip
        tb, fb = band(engine, model, "tpot"), band(engine, model, "ttft")
        try:
            cal = calibrate(model, hw, measured, base=params) if measured else None
        except PlannerInputError:
            cal = None
        if cal is not None:
            notes.append(f"{layout} on {host}: {cal.sentence()}")
        for m, row in zip(measured, pts.to_dict("records"), strict=True):
            try:
                sched = row_settings(engine, launched.get(row["run_id"]), row.get("extra"))
                w = Workload(m.isl, m.osl, engine, num_prompts=_prompts(row),
                             token_budget=sched.token_budget, recv_interval=sched.recv_interval)
                pr = predict(model, hw, lay, w, np.array([m.concurrency]), params)
                cp = predict(model, hw, lay, w, np.array([m.concurrency]), cal.params) if cal \
                    else None  # fmt: skip
            except PlannerInputError as exc:
                reasons.append(f"{layout} on {host}: {exc}")
                break
            out.append({"layout_label": layout, "host": host, "engine": engine,
                        "concurrency": m.concurrency,
                        "predicted_tpot_ms": float(pr.tpot_ms[0]),
                        "predicted_tpot_low_ms": float(tb.low(pr.tpot_ms[0])),
                        "predicted_tpot_high_ms": float(tb.high(pr.tpot_ms[0])),
                        "predicted_ttft_ms": float(pr.ttft_ms[0]),
                        "predicted_ttft_low_ms": float(fb.low(pr.ttft_ms[0])),
                        "predicted_ttft_high_ms": float(fb.high(pr.ttft_ms[0])),
                        "band": tb.describe(),
                        "predicted_tokens_per_s": float(pr.output_tok_s[0]),
                        "calibrated_tpot_ms": float(cp.tpot_ms[0]) if cp else None,
                        "hardware": hw.name, "hardware_source": hw.source,
                        "model_source": model.source,
                        "launch_flags": " ".join(sched.flags),
                        "comm_source": "spec-sheet link latency and bandwidth"})  # fmt: skip
    if notes:
        st.caption("Calibrated mode (per-host factors fitted on these measured points): "
                   + "; ".join(notes))  # fmt: skip
    frame = pd.DataFrame(out)
    if not frame.empty:
        frame = frame.drop_duplicates(["layout_label", "host", "engine", "concurrency"])
    return frame, reasons
