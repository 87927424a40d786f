"""The output half of the Tradeoff page: the headline, close calls, hypotheses, charts with
the measured-error band, the step breakdown, blocked layouts and the assumptions.

Kept apart from pages/tradeoff.py (inputs) so each stays readable; it formats a PlanResult
and computes nothing beyond display.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import ui
from planner.api import (
    REPORT_CONCURRENCIES,
    TERMS,
    PlanResult,
    band,
    call_at,
    reference,
    result_commands,
    sglang_only_lines,
)

COLORS = {"attention": "#4C78A8", "kv_cache": "#F58518", "mlp": "#72B7B2",
          "experts": "#54A24B", "expert_imbalance": "#9D755D", "lm_head": "#BAB0AC",
          "prefill": "#B279A2", "allreduce": "#E45756", "all_to_all": "#FF9DA6"}  # fmt: skip
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC", "#EECA3B", "#439894", "#D67195")  # fmt: skip
VIEWS = ("model", "calibrated")
HYPOTHESIS = "hypothesis"


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


def _label(name: str, part: pd.DataFrame) -> str:
    if not part["compliant"].iloc[0]:
        return name + " [blocked]"
    return name + (f" [{HYPOTHESIS}]" if part["hypothesis"].iloc[0] else "")


def band_chart(data: pd.DataFrame, y: str, title: str, y_title: str,
               with_band: bool = True) -> go.Figure:  # fmt: skip
    """One line per layout (solid: recommendable, dot: hypothesis, dash: blocked), each with
    its measured-error band as a shaded area."""
    fig = go.Figure()
    for i, (name, part) in enumerate(data.groupby("layout", sort=False)):
        color = PALETTE[i % len(PALETTE)]
        label = _label(name, part)
        blocked, hyp = not part["compliant"].iloc[0], bool(part["hypothesis"].iloc[0])
        dash = "dash" if blocked else "dot" if hyp else "solid"
        ok = part[part["fits"]]
        if with_band and not ok.empty and not blocked:
            fig.add_scatter(x=np.r_[ok["concurrency"], ok["concurrency"][::-1]],
                            y=np.r_[ok[f"{y}_high"], ok[f"{y}_low"][::-1]], fill="toself",
                            opacity=0.15, line={"width": 0, "color": color},
                            hoverinfo="skip", showlegend=False, legendgroup=name,
                            name=f"{label} band")  # fmt: skip
        p90 = part[f"{y}_p90"] if f"{y}_p90" in part else part[y] * np.nan
        fig.add_scatter(x=part["concurrency"], y=part[y].where(part["fits"]), name=label,
                        legendgroup=name, line={"dash": dash, "color": color},
                        customdata=p90, hovertemplate="%{x}: mean %{y:.2f} ms, p90 "
                        "%{customdata:.2f} ms<extra>" + label + "</extra>")  # fmt: skip
        if with_band and p90.notna().any():
            fig.add_scatter(x=part["concurrency"], y=p90.where(part["fits"]), legendgroup=name,
                            name=label + " p90", showlegend=False, opacity=0.6,
                            line={"dash": "dot", "color": color, "width": 1})  # fmt: skip
        fig.add_scatter(x=part["concurrency"], y=part[y].where(~part["fits"]), legendgroup=name,
                        name=label + " (queues for KV room)", showlegend=False, opacity=0.35,
                        line={"dash": "dot", "color": color})  # fmt: skip
    fig.update_layout(title=title, xaxis_title="concurrency (requests in flight)",
                      yaxis_title=y_title, height=460, margin={"t": 50, "b": 40})  # fmt: skip
    fig.update_xaxes(type="log")
    return fig


def blocked_lines(res: PlanResult, calibrated: bool) -> list[str]:
    curves = [r.view(calibrated) for r in res.layouts]
    good = np.vstack([np.where(c.fits & r.recommendable, c.tpot_ms, np.inf)
                      for c, r in zip(curves, res.layouts, strict=True)]).min(axis=0)  # fmt: skip
    out = []
    for r, cur in zip(res.layouts, curves, strict=True):
        if r.compliant:
            continue
        rules = "; ".join(f"`{v.rule_id}` ({v.sentence})" for v in r.violations)
        gain = np.where(cur.fits & np.isfinite(good), good - cur.tpot_ms, -np.inf)
        j = int(np.argmax(gain))
        if gain[j] > 0:
            what = (f"it would gain {gain[j]:.2f} ms TPOT at concurrency "
                    f"{int(cur.concurrency[j])}: the policy costs {gain[j]:.2f} ms there")  # fmt: skip
        else:
            what = "it is never faster than the best recommended layout here"
        out.append(f"**{r.layout.name}** breaks {rules}; {what}.")
    return out


def _commands(res: PlanResult, names: list[str]) -> list[str]:
    out = []
    for name in names:
        for c in result_commands(res, name):
            out.append(f"  - {name} on {c['engine']}: `{c['launch']}`, measured by "
                       f"`{c['measure']}`")  # fmt: skip
    return out


def recommendation(res: PlanResult, calibrated: bool, at: int) -> None:
    ranges = res.recommended_calibrated if calibrated else res.recommended
    st.subheader("Recommended (compliant, fits, on measured or fitted collectives)")
    if not ranges:
        st.warning("No compliant layout on measured collectives fits at these concurrencies.")
    else:
        head = ranges[0]
        st.markdown(f"**Headline: {head.layout}** from concurrency {head.start} "
                    f"(TPOT {head.tpot_ms_start:.2f} ms)")  # fmt: skip
        st.markdown("\n".join(
            f"- concurrency {x.start}-{x.end}: **{x.layout}** "
            f"(TPOT {x.tpot_ms_start:.2f}-{x.tpot_ms_end:.2f} ms)" for x in ranges))  # fmt: skip
    call = call_at(res, at, calibrated)
    if call.layout and call.too_close:
        st.warning(
            f"At concurrency {at}: too close to call - {call.layout} "
            f"({call.tpot_ms:.2f} ms; 80% of measured runs {call.tpot_ms_low:.2f}-"
            f"{call.tpot_ms_high:.2f}) and "
            f"{', '.join(call.too_close)} overlap within the model's measured error. Measure "
            "both:\n" + "\n".join(_commands(res, [call.layout, *call.too_close])))  # fmt: skip
    elif call.layout:
        st.success(f"At concurrency {at}: {call.layout} ({call.tpot_ms:.2f} ms; 80% of "
                   f"measured runs {call.tpot_ms_low:.2f}-{call.tpot_ms_high:.2f}) beats every other "
                   "recommendable layout beyond the model's measured error.")  # fmt: skip
    hyps = [r for r in res.layouts if r.compliant and r.hypothesis]
    if hyps:
        st.subheader("Hypotheses (an unmeasured collective: never the headline)")
        for r in hyps:
            cur = r.view(calibrated)
            j = cur.at(at)
            ops = ", ".join(f"{c.op} on {c.world_size} GPUs ({c.kind}: {c.source})"
                            for c in r.unmeasured)  # fmt: skip
            tpot = (f"{cur.tpot_ms[j]:.2f} ms at concurrency {at}"
                    if np.isfinite(cur.tpot_ms[j]) else "no prediction")  # fmt: skip
            st.markdown(f"- **{r.layout.name}** [{HYPOTHESIS}]: {tpot}; rests on {ops}. "
                        "Measure it: " + "; ".join(f"`{m}`" for m in r.measure))  # fmt: skip


def calibration_check(res: PlanResult, detail: bool) -> None:
    """The calibration's own check (held-back points before -> after), and in the calibrated
    view what the measurements pinned and its notes."""
    cal = res.calibration
    (st.success if cal.applied else st.warning)(f"Calibration: {cal.sentence()}")
    if detail:
        lines = [f"- **{term}**: {status}" for term, status in cal.pinned.items()]
        lines += [f"- {n}" for n in cal.notes]
        lines.append("- factors: " + ", ".join(f"{k} x{v:.2f}" for k, v in cal.factors.items()))
        if cal.band is not None:
            lines.append(f"- band: {cal.band.describe()}")
        st.markdown("\n".join(lines))


def render(res: PlanResult, notes: list[str]) -> None:
    calibrated = False
    if res.calibration is not None:
        view = st.radio("Figures", VIEWS, horizontal=True, key="view", bind="query-params",
                        help="calibrated: the serving model with this host's factors, where "
                        "they beat the fitted model on held-back measured points; a traced "
                        "step sets proportions, never a TPOT")  # fmt: skip
        calibrated = view == "calibrated"
        calibration_check(res, calibrated)
    grid = [c for c in REPORT_CONCURRENCIES if c in set(res.concurrency.tolist())] or [
        int(res.concurrency[0])]  # fmt: skip
    at = st.selectbox("At concurrency", grid, key="at", bind="query-params")
    recommendation(res, calibrated, int(at))
    for line in sglang_only_lines(res.layouts):
        st.caption(line)
    for finding in res.findings:
        st.info(finding)
    if res.model.name == reference.MODEL and any(
        "published" in a.source for a in res.assumptions if a.what == "all_reduce latency"
    ):
        st.subheader("Published figures vs the model")
        st.markdown("\n".join(f"- {c['figure']}: published {c['published']}; model {c['model']}"
                              for c in reference.checks(res)))  # fmt: skip

    data = points_frame(res, calibrated)
    tag = "-calibrated" if calibrated else ""
    st.subheader(f"Serving prediction: {res.isl} in / {res.osl} out ({res.bench} benchmark, "
                 f"{res.engine})")  # fmt: skip
    bands = (res.calibration.band.describe() if calibrated and res.calibration.band is not None
             else band(res.engine, res.model, "tpot", res.hardware).describe())  # fmt: skip
    ui.chart(band_chart(data, "tpot_ms", f"Predicted mean TPOT, thin dotted: p90 ({res.isl} in "
                        f"/ {res.osl} out; shaded: measured-error band; dotted: hypothesis; "
                        "dashed: blocked)", "TPOT (ms)"), data, f"tradeoff-tpot{tag}")  # fmt: skip
    st.caption(f"Band: {bands}. Other GPU generations carry over through spec-sheet numbers.")
    ui.chart(band_chart(data, "ttft_ms", "Predicted mean TTFT, thin dotted: p90 (shaded: "
                        "measured-error band)", "TTFT (ms)"), data, f"tradeoff-ttft{tag}")  # fmt: skip
    ui.chart(band_chart(data, "tokens_per_s", "Output throughput vs concurrency",
                        "tokens/s (all GPUs)", with_band=False),
             data[["layout", "concurrency", "tokens_per_s", "tokens_per_s_per_gpu", "fits"]],
             f"tradeoff-throughput{tag}")  # fmt: skip

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
    best = call_at(res, int(at), calibrated).layout
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
    missing = [f"{r.layout.name}: {r.curve.why_not}" for r in res.layouts if r.curve.why_not]
    if missing:
        st.caption("No prediction for: " + "; ".join(missing))

    if res.crossovers:
        st.subheader("Crossovers")
        st.markdown("\n".join(f"- {x.sentence()}" for x in res.crossovers[:12]))
    blocked = blocked_lines(res, calibrated)
    if blocked:
        st.subheader("Blocked by the policy")
        st.caption(f"Policy {res.policy.label}: these layouts are never recommended.")
        st.markdown("\n".join(f"- {line}" for line in blocked))
    st.subheader("Assumptions and sources")
    st.markdown("\n".join(f"- **{a.what}**: {a.value} — *{a.source}*" for a in res.assumptions)
                + "".join(f"\n- **input**: {n}" for n in notes))  # fmt: skip
    ui.csv_download(data, f"tradeoff-points{tag}", "All points (CSV)")
