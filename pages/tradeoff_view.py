"""The output half of the Tradeoff page: sentences, charts, blocked layouts, assumptions.

Kept apart from pages/tradeoff.py (inputs) so each stays readable; it formats a PlanResult
and computes nothing beyond display.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages import ui
from planner import reference
from planner.api import REPORT_CONCURRENCIES, PlanResult
from planner.costmodel import TERMS

COLORS = {"weights": "#4C78A8", "expert_imbalance": "#9D755D", "kv_cache": "#F58518",
          "allreduce": "#E45756", "all_to_all": "#FF9DA6"}  # fmt: skip
VIEWS = ("model", "calibrated")


def points_frame(res: PlanResult, calibrated: bool) -> pd.DataFrame:
    rows = []
    for r in res.layouts:
        cur = r.view(calibrated)
        frame = pd.DataFrame({t: cur.terms[t] for t in TERMS})
        frame.insert(0, "concurrency", cur.concurrency)
        frame.insert(0, "kind", r.layout.kind)
        frame.insert(0, "layout", r.layout.name)
        frame["tpot_ms"] = cur.tpot_ms
        frame["tokens_per_s"] = cur.tokens_per_s
        frame["tokens_per_s_per_gpu"] = cur.tokens_per_s / res.hardware.gpu_count
        frame["fits"] = cur.fits
        frame["compliant"] = r.compliant
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def line_chart(data: pd.DataFrame, y: str, title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    for name, part in data.groupby("layout", sort=False):
        blocked = not part["compliant"].iloc[0]
        label = name + (" [blocked]" if blocked else "")
        fits = part[y].where(part["fits"])
        fig.add_scatter(x=part["concurrency"], y=fits, name=label, legendgroup=name,
                        line={"dash": "dash" if blocked else "solid"})  # fmt: skip
        fig.add_scatter(x=part["concurrency"], y=part[y].where(~part["fits"]), legendgroup=name,
                        name=label + " (does not fit)", showlegend=False, opacity=0.35,
                        line={"dash": "dot"})  # fmt: skip
    fig.update_layout(title=title, xaxis_title="concurrency (requests in flight)",
                      yaxis_title=y_title, height=460, margin={"t": 50, "b": 40})  # fmt: skip
    fig.update_xaxes(type="log")
    return fig


def blocked_lines(res: PlanResult, calibrated: bool) -> list[str]:
    curves = [r.view(calibrated) for r in res.layouts]
    good = np.vstack([np.where(c.fits & r.compliant, c.tpot_ms, np.inf)
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
            what = (
                "it is never faster than the best compliant layout here (the policy costs no TPOT)"
            )
        out.append(f"**{r.layout.name}** breaks {rules}; {what}.")
    return out


def render(res: PlanResult, notes: list[str]) -> None:
    calibrated = False
    if res.calibration is not None:
        view = st.radio("Figures", VIEWS, horizontal=True, key="view", bind="query-params",
                        help="calibrated: compute and communication terms scaled to the "
                        "measured (or published) step; a profiled step is slower than the "
                        "service")  # fmt: skip
        calibrated = view == "calibrated"
    ranges = res.recommended_calibrated if calibrated else res.recommended
    st.subheader("Recommended (compliant, fits in memory)")
    if ranges:
        st.markdown("\n".join(
            f"- concurrency {x.start}-{x.end}: **{x.layout}** "
            f"(TPOT {x.tpot_ms_start:.2f}-{x.tpot_ms_end:.2f} ms)" for x in ranges))  # fmt: skip
    else:
        st.warning("No compliant layout fits in GPU memory at these concurrencies.")
    from planner.engine_commands import sglang_only_lines  # issue 11: how to measure those

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
    ui.chart(line_chart(data, "tpot_ms", "TPOT vs concurrency (dashed: blocked by the policy)",
                     "TPOT (ms)"), data, f"tradeoff-tpot{tag}")  # fmt: skip
    ui.chart(line_chart(data, "tokens_per_s", "Throughput vs concurrency", "tokens/s (all GPUs)"),
          data[["layout", "concurrency", "tokens_per_s", "tokens_per_s_per_gpu", "fits"]],
          f"tradeoff-throughput{tag}")  # fmt: skip

    st.subheader("Step breakdown")
    grid = [c for c in REPORT_CONCURRENCIES if c in set(res.concurrency.tolist())] or [
        int(res.concurrency[0])]  # fmt: skip
    at = st.selectbox("At concurrency", grid, key="at", bind="query-params")
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
    best = res.best_at(int(at), calibrated)
    sentences = []
    for row in rows.to_dict("records"):
        comm = row["allreduce"] + row["all_to_all"]
        sentences.append(f"{row['layout']}: {row['tpot_ms']:.2f} ms (AllReduce "
                         f"{row['allreduce']:.2f} ms, all-to-all {row['all_to_all']:.2f} ms, "
                         f"communication {comm / row['tpot_ms']:.0%})"
                         + ("" if row["fits"] else ", does not fit"))  # fmt: skip
    st.caption(
        f"At concurrency {at}, best compliant: {best or 'none fits'}. " + "; ".join(sentences)
    )

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
    ui.csv_download(points_frame(res, calibrated), f"tradeoff-points{tag}", "All points (CSV)")
