"""The serving model on the Serving page: predicted-vs-measured points, each prediction with
the model's measured-error band for its engine, weight format and host class, and calibrated
mode as the planner runs it (planner.cost.calibrate): per host, fitted on that host's points
and shown only where it predicted a point it had not seen (held back), with its check.
Numbers come from planner/ and store.queries.planner; this module formats them.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from store import RELABEL_COMMAND, UNKNOWN_HOST

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

    every_host = qp.model_configs(loc, model_id)  # one read for all the page's hosts
    rows = every_host[every_host["host"] == host] if not every_host.empty else every_host
    if rows.empty:
        rows = every_host  # the newest config recorded on any host
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


@st.cache_data(max_entries=64, show_spinner="Calibrating on this host's points ...")
def _calibrated(_calibrate, model, hw, points: list, params):
    """planner.calibrate on one host's points: seconds of fitting and held-back checks (4
    hosts at 10,000 runs: 6 s a render), so kept per inputs for the session's reruns."""
    return _calibrate(model, hw, points, base=params)


@st.cache_data(max_entries=512, show_spinner="Simulating the benchmark on each layout ...")
def _predicted(_predict, model, hw, layout, work, concurrency: int, params):
    """planner.predict at one measured point: a scheduler simulation of the benchmark (a
    fraction of a second each, tens per run), kept per inputs for the session's reruns."""
    return _predict(model, hw, layout, work, np.array([concurrency]), params)


def serving_predictions(loc, bench: pd.DataFrame, model_id: str, hw_choice: str,
                        hardware_for, model_for,
                        calibrated: bool = False) -> tuple[pd.DataFrame, list[str]]:  # fmt: skip
    """Predicted TPOT / TTFT / tokens/s at each measured (layout, host, concurrency, I/O), and
    why-nots; with ``calibrated``, per host the calibration's prediction of the points it
    held back, its check shown as a caption."""
    try:
        from planner.api import (
            PlannerInputError,
            band,
            calibrate,
            measurements,
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
    held: dict[tuple, float] = {}  # (host, layout, engine, c, isl, osl) -> held-back TPOT
    by_host: dict[str, list] = {}
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
        rows = part.dropna(subset=["concurrency", "mean_tpot_ms"]).to_dict("records")
        measured = measurements.points_from_bench(rows, launched)
        by_host.setdefault(host, []).append((model, hw, params, measured))
        tb, fb = band(engine, model, "tpot", hw), band(engine, model, "ttft", hw)
        for m, row in zip(measured, rows, strict=True):
            try:
                pr = _predicted(predict, model, hw, m.layout, m.work(), m.concurrency, params)
            except PlannerInputError as exc:
                reasons.append(f"{layout} on {host}: {exc}")
                break
            out.append({"layout_label": layout, "host": host, "engine": engine,
                        "concurrency": m.concurrency, "input_len": m.isl, "output_len": m.osl,
                        "predicted_tpot_ms": float(pr.tpot_ms[0]),
                        "predicted_tpot_low_ms": float(tb.low(pr.tpot_ms[0])),
                        "predicted_tpot_high_ms": float(tb.high(pr.tpot_ms[0])),
                        "predicted_ttft_ms": float(pr.ttft_ms[0]),
                        "predicted_ttft_low_ms": float(fb.low(pr.ttft_ms[0])),
                        "predicted_ttft_high_ms": float(fb.high(pr.ttft_ms[0])),
                        **{f"predicted_{k}_{q}_ms": float(v[0])
                           for k, d in (("tpot", pr.percentiles["tpot_ms"]),
                                        ("ttft", pr.percentiles["ttft_ms"]))
                           for q, v in d.items()},
                        "band": tb.describe(),
                        "predicted_tokens_per_s": float(pr.output_tok_s[0]),
                        "hardware": hw.name, "hardware_source": hw.source,
                        "model_source": model.source,
                        "launch_flags": " ".join(row_settings(engine, launched.get(row["run_id"]),
                                                              row.get("extra")).flags),
                        "_layout": m.layout.describe(),
                        "comm_source": "spec-sheet link latency and bandwidth"})  # fmt: skip
    for host, groups in by_host.items() if calibrated else ():
        if host == UNKNOWN_HOST:  # runs of machines nobody named: no one host to fit
            notes.append(f"{host}: not calibrated: its runs name no machine, and runs of "
                         f"different machines are never fitted together (name each: "
                         f"{RELABEL_COMMAND.format(run_id='RUN_ID')})")
            continue
        model, hw, params, _ = groups[0]
        pts = [m for g in groups for m in g[3]]
        try:
            cal = _calibrated(calibrate, model, hw, pts, params)
        except PlannerInputError as exc:
            notes.append(f"{host}: calibration not possible ({exc})")
            continue
        notes.append(f"{host}: {cal.sentence()}")
        for m, err in zip(cal.check.points, cal.check.after, strict=True):
            held[(host, m.layout.describe(), m.engine, m.concurrency, m.isl, m.osl)] = \
                m.tpot_ms * (1 + err)  # fmt: skip
    if notes:
        st.caption("Calibrated mode (planner.cost.calibrate: fitted on each host's points, drawn "
                   "only where it predicted a point it held back): " + "; ".join(notes))  # fmt: skip
    frame = pd.DataFrame(out)
    if not frame.empty:
        frame["calibrated_tpot_ms"] = [
            held.get((r["host"], r["_layout"], r["engine"], r["concurrency"], r["input_len"],
                      r["output_len"])) for r in frame.to_dict("records")]  # fmt: skip
        frame = frame.drop(columns="_layout").drop_duplicates(["layout_label", "host", "engine", "concurrency"])
    return frame, reasons
