"""The output half of the Tradeoff page: the answer first (pages/helpers/tradeoff_answer.py),
then tabs, each titled with what it answers: TPOT and TTFT curves with the measured-error
band, the best layout at each concurrency (close calls, crossovers, the step breakdown),
every point as a table, findings, hypotheses, published figures, what the policy costs, the
commands that measure the answer, the calibration check and the assumptions.

Kept apart from pages/tradeoff.py (inputs) so each stays readable; it formats a PlanResult
and computes nothing beyond display.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import ui
from pages.helpers.tradeoff_answer import PALETTE, answer, dash, layout_label, pareto, plain
from pages.helpers.tradeoff_notes import (
    calibration_check,
    commands,
    hypotheses,
    policy,
    recommendation,
)
from planner.api import (
    REPORT_CONCURRENCIES,
    TERMS,
    PlanResult,
    Targets,
    band,
    call_at,
    meet_targets,
    reference,
)

COLORS = {"attention": "#4C78A8", "kv_cache": "#F58518", "mlp": "#72B7B2",
          "experts": "#54A24B", "expert_imbalance": "#9D755D", "lm_head": "#BAB0AC",
          "prefill": "#B279A2", "allreduce": "#E45756", "all_to_all": "#FF9DA6"}  # fmt: skip
VIEWS = ("model", "calibrated")


def points_frame(res: PlanResult, calibrated: bool) -> pd.DataFrame:
    rows = []
    for r in res.layouts:
        cur = r.view(calibrated)
        frame = pd.DataFrame({t: cur.terms[t] for t in TERMS})
        frame.insert(0, "concurrency", cur.concurrency)
        frame.insert(0, "kind", r.layout.kind)
        frame.insert(0, "layout", r.layout.name)
        frame["tpot_ms"], frame["tpot_ms_low"], frame["tpot_ms_high"] = (
            cur.tpot_ms, cur.low_ms, cur.high_ms)  # fmt: skip
        frame["ttft_ms"], frame["ttft_ms_low"], frame["ttft_ms_high"] = (
            cur.ttft_ms, cur.ttft_low_ms, cur.ttft_high_ms)  # fmt: skip
        nan = np.full(len(cur.concurrency), np.nan)
        for k in ("tpot_ms", "ttft_ms"):  # the benchmark's p90 beside the mean
            frame[f"{k}_p90"] = cur.percentiles.get(k, {}).get("p90", nan)
        frame["tokens_per_s"] = cur.tokens_per_s
        frame["tokens_per_s_per_gpu"] = cur.tokens_per_s / res.hardware.gpu_count
        frame["fits"] = cur.fits
        frame["compliant"] = r.compliant
        frame["hypothesis"] = r.hypothesis
        frame["engine"] = cur.engine
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def band_chart(data: pd.DataFrame, y: str, title: str, y_title: str,
               with_band: bool = True) -> go.Figure:  # fmt: skip
    """One line per layout (solid: recommendable, dot: hypothesis, dash: blocked), each with
    its measured-error band as a shaded area."""
    fig = go.Figure()
    for i, (name, part) in enumerate(data.groupby("layout", sort=False)):
        color = PALETTE[i % len(PALETTE)]
        comp, hyp = bool(part["compliant"].iloc[0]), bool(part["hypothesis"].iloc[0])
        label, blocked = layout_label(name, comp, hyp), not comp
        ok = part[part["fits"]]
        if with_band and not ok.empty and not blocked:
            fig.add_scatter(x=np.r_[ok["concurrency"].to_numpy(), ok["concurrency"].to_numpy()[::-1]],
                            y=np.r_[ok[f"{y}_high"].to_numpy(), ok[f"{y}_low"].to_numpy()[::-1]],
                            fill="toself",
                            opacity=0.15, line={"width": 0, "color": color},
                            hoverinfo="skip", showlegend=False, legendgroup=name,
                            name=f"{label} band")  # fmt: skip
        # numpy, not pandas: plotly validates a Series through narwhals, ~10 ms a trace (99
        # traces a render at fleet scale: most of the page's warm time)
        xs = part["concurrency"].to_numpy()
        p90 = part[f"{y}_p90"] if f"{y}_p90" in part else part[y] * np.nan
        fig.add_scatter(x=xs, y=part[y].where(part["fits"]).to_numpy(), name=label,
                        legendgroup=name, line={"dash": dash(comp, hyp), "color": color},
                        customdata=p90.to_numpy(), hovertemplate="%{x}: mean %{y:.2f} ms, p90 "
                        "%{customdata:.2f} ms<extra>" + label + "</extra>")  # fmt: skip
        if with_band and p90.notna().any():
            fig.add_scatter(x=xs, y=p90.where(part["fits"]).to_numpy(), legendgroup=name,
                            name=label + " p90", showlegend=False, opacity=0.6,
                            line={"dash": "dot", "color": color, "width": 1})  # fmt: skip
        fig.add_scatter(x=xs, y=part[y].where(~part["fits"]).to_numpy(), legendgroup=name,
                        name=label + " (queues for KV room)", showlegend=False, opacity=0.35,
                        line={"dash": "dot", "color": color})  # fmt: skip
    fig.update_layout(title=title, xaxis_title="concurrency (requests in flight)",
                      yaxis_title=y_title, height=460, margin={"t": 50, "b": 40})  # fmt: skip
    fig.update_xaxes(type="log")
    return fig


TABS = ("Best layout at each concurrency", "TPOT and TTFT by concurrency",
        "Every point (table)", "Findings", "Hypotheses: unmeasured collectives",
        "Published figures vs the model", "What the policy costs", "Commands to measure",
        "Calibration check", "Assumptions and sources")  # fmt: skip


def render(res: PlanResult, notes: list[str], targets: Targets, measured: pd.DataFrame,
           host: str | None, answer_area: Any, view_slot: Any) -> None:  # fmt: skip
    """The answer and the Pareto chart into ``answer_area``, the model / calibrated switch
    into ``view_slot``, then the tabs."""
    calibrated = False
    if res.calibration is not None:
        with view_slot:
            view = st.segmented_control("Figures", VIEWS, default=VIEWS[0], required=True,
                                        key="view", bind="query-params", help="calibrated: the serving model with this host's factors, "
                            "where they beat the fitted model on held-back measured points; "
                            "a traced step sets proportions, never a TPOT")  # fmt: skip
        calibrated = view == "calibrated"
    ans = meet_targets(res, targets, calibrated)
    with answer_area:
        answer(res, ans)
        pareto(res, ans, measured, host, calibrated)
    published = res.model.name == reference.MODEL and any(
        "published" in a.source for a in res.assumptions if a.what == "all_reduce latency")
    shown = [t for t in TABS if (published or t != TABS[5])
             and (res.calibration is not None or t != TABS[8])]  # fmt: skip
    tabs = dict(zip(shown, st.tabs(shown), strict=True))
    data = points_frame(res, calibrated)
    tag = "-calibrated" if calibrated else ""
    with tabs[TABS[0]]:
        at = per_concurrency(res, data, calibrated, tag)
    with tabs[TABS[1]]:
        curves(res, data, calibrated, tag)
    with tabs[TABS[2]]:
        table(res, data, tag)
    with tabs[TABS[3]]:
        for finding in res.findings:
            st.info(plain(finding))
        missing = [f"{r.layout.name}: {r.curve.why_not}" for r in res.layouts if r.curve.why_not]
        if missing:
            st.caption(plain("No prediction for: " + "; ".join(missing)))
        if not res.findings and not missing:
            st.caption("Nothing to flag on this plan.")
    with tabs[TABS[4]]:
        hypotheses(res, calibrated, at)
    if published:
        with tabs[TABS[5]]:
            st.markdown("\n".join(f"- {c['figure']}: published {c['published']}; model "
                                  f"{c['model']}" for c in reference.checks(res)))  # fmt: skip
    with tabs[TABS[6]]:
        policy(res, ans, calibrated)
    with tabs[TABS[7]]:
        commands(res, ans)
    if res.calibration is not None:
        with tabs[TABS[8]]:
            calibration_check(res, calibrated)
    with tabs[TABS[9]]:  # one element per line: together they run to thousands of characters
        for a in res.assumptions:
            st.markdown(f"- **{a.what}**: {plain(a.value)} — *{plain(a.source)}*")
        for n in notes:
            st.markdown(f"- **input**: {plain(n)}")


def per_concurrency(res: PlanResult, data: pd.DataFrame, calibrated: bool, tag: str) -> int:
    """The recommendation at one concurrency (bound to ``?at=``), its close call, the
    crossovers and the step breakdown there; returns the concurrency."""
    grid = [c for c in REPORT_CONCURRENCIES if c in set(res.concurrency.tolist())] or [
        int(res.concurrency[0])]  # fmt: skip
    at = int(st.selectbox("At concurrency", grid, key="at", bind="query-params"))
    recommendation(res, calibrated, at)
    if res.crossovers:
        st.subheader("Crossovers")
        st.markdown("\n".join(f"- {x.sentence()}" for x in res.crossovers[:12]))
    breakdown(res, data, calibrated, at, tag)
    return at


def curves(res: PlanResult, data: pd.DataFrame, calibrated: bool, tag: str) -> None:
    st.subheader(f"Serving prediction: {res.isl} in / {res.osl} out ({res.bench} benchmark, "
                 f"{res.engine})")  # fmt: skip
    bands = (res.calibration.band.describe() if calibrated and res.calibration.band is not None
             else band(res.engine, res.model, "tpot", res.hardware).describe())  # fmt: skip
    ui.chart(band_chart(data, "tpot_ms", f"Predicted mean TPOT, thin dotted: p90 ({res.isl} in "
                        f"/ {res.osl} out; shaded: measured-error band; dotted: hypothesis; "
                        "dashed: blocked)",
                        "TPOT (ms)"), data, f"tradeoff-tpot{tag}")  # fmt: skip
    st.caption(f"Band: {plain(bands)}. Other GPU generations carry over through spec-sheet "
               "numbers.")  # fmt: skip
    ui.chart(band_chart(data, "ttft_ms", "Predicted mean TTFT, thin dotted: p90 (shaded: "
                        "measured-error band)",
                        "TTFT (ms)"), data, f"tradeoff-ttft{tag}")  # fmt: skip
    ui.chart(band_chart(data, "tokens_per_s", "Output throughput vs concurrency",
                        "tokens/s (all GPUs)", with_band=False),
             data[["layout", "concurrency", "tokens_per_s", "tokens_per_s_per_gpu", "fits"]],
             f"tradeoff-throughput{tag}")  # fmt: skip


def table(res: PlanResult, data: pd.DataFrame, tag: str) -> None:
    """The report concurrencies of every layout; the CSV holds every point of the grid."""
    grid = set(res.report_concurrencies())
    cols = ["layout", "concurrency", "tpot_ms", "tpot_ms_low", "tpot_ms_high", "ttft_ms",
            "tokens_per_s_per_gpu", "fits", "compliant", "hypothesis", "engine"]  # fmt: skip
    st.dataframe(data[data["concurrency"].isin(grid)][cols], hide_index=True,
                 width="stretch")  # fmt: skip
    ui.csv_download(data, f"tradeoff-points{tag}", "All points (CSV)")


def breakdown(res: PlanResult, data: pd.DataFrame, calibrated: bool, at: int, tag: str) -> None:
    st.subheader("Step breakdown")
    rows = data[data["concurrency"] == at]
    fig = go.Figure()
    for term in TERMS:
        fig.add_bar(y=rows["layout"], x=rows[term], name=term, orientation="h",
                    marker_color=COLORS[term])  # fmt: skip
    fig.update_layout(barmode="stack", title=f"Decode step at concurrency {at} (ms)",
                      height=80 + 32 * len(rows), margin={"t": 50, "b": 40, "l": 10})  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    ui.chart(fig, rows[["layout", "kind", "concurrency", *TERMS, "tpot_ms", "fits"]],
             f"tradeoff-breakdown-c{at}{tag}")  # fmt: skip
    best = call_at(res, at, calibrated).layout
    sentences = []
    for row in rows.to_dict("records"):
        if row["tpot_ms"] != row["tpot_ms"]:
            continue
        comm = row["allreduce"] + row["all_to_all"]
        sentences.append(f"{row['layout']}: {row['tpot_ms']:.2f} ms (AllReduce "
                         f"{row['allreduce']:.2f} ms, all-to-all {row['all_to_all']:.2f} ms, "
                         f"communication {comm / row['tpot_ms']:.0%})"
                         + ("" if row["fits"] else ", queues for KV room"))  # fmt: skip
    st.caption(f"At concurrency {at}, best recommendable: {best or 'none fits'}. "
               + "; ".join(sentences))  # fmt: skip
