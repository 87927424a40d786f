"""The Tradeoff page's first screen: the setup in one line, the answer under the latency
targets (one sentence and metric cards, against the runner-up) and the Pareto chart.

The Pareto chart: output tokens/s per GPU against tokens/s per user (1000 / TPOT), one curve
per layout over concurrency (solid where both targets hold, faint where one is missed), the
TPOT target as a line, an x where each layout's TTFT passes its target, the answer starred,
and the store's measured serving runs of the same model on the same host as diamonds.
It formats planner.meet_targets' answer and computes nothing beyond display.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import ui
from planner.api import PlanResult, SloAnswer, latency

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC", "#EECA3B", "#439894", "#D67195")  # fmt: skip
HYPOTHESIS = "hypothesis"
_MARKUP = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>$~:])")


def plain(text: object) -> str:
    """``text`` for st.markdown / captions / alerts, shown as written (names from the store,
    host files and links are never markup: no bold, link, colour or LaTeX)."""
    return _MARKUP.sub(r"\\\1", str(text))


def layout_label(name: str, compliant: bool, hypothesis: bool) -> str:
    if not compliant:
        return name + " [blocked]"
    return name + (f" [{HYPOTHESIS}]" if hypothesis else "")


def dash(compliant: bool, hypothesis: bool) -> str:
    """Solid: recommendable; dot: hypothesis; dash: blocked by the policy (every chart)."""
    return "dash" if not compliant else "dot" if hypothesis else "solid"


def setup_text(res: PlanResult, ans: SloAnswer) -> str:
    """Model, host, engine, lengths and targets in a line (plain text)."""
    hw = res.hardware
    return (f"{res.model.name} on {hw.gpu_count}x {hw.gpu_model} ({hw.name}), {res.engine}, "
            f"{res.isl} in / {res.osl} out; targets {ans.targets.describe(ans.stat)}")  # fmt: skip


def answer(res: PlanResult, ans: SloAnswer) -> None:
    """The setup in a line, the sentence and the metric cards, against the runner-up (or,
    when nothing meets the targets, which target fails first and by how much)."""
    b, r = ans.best, ans.runner_up
    st.caption(plain(setup_text(res, ans)))
    with st.container(key="answer"):
        if b is None:
            st.warning(plain(ans.sentence()))
        else:
            st.markdown(f"**Answer: {plain(b.layout)}** serves the most within the targets: "
                        f"{b.tok_s_per_gpu:.1f} output tokens/s per GPU at concurrency "
                        f"{b.max_concurrency}.")  # fmt: skip
            cols = st.columns([2, 2, 1.2, 1.2, 1.2])
            vs = (f"{b.tok_s_per_gpu / r.tok_s_per_gpu - 1:+.0%} vs runner-up"
                  if r is not None else None)  # fmt: skip
            cols[0].metric("Best layout", b.layout, help=b.layout)
            cols[1].metric("Output tokens/s per GPU", f"{b.tok_s_per_gpu:.1f}", vs,
                           help=f"80% of measured runs within {b.tok_s_low:.1f}-"
                           f"{b.tok_s_high:.1f}" + (f"; runner-up {r.layout}: "
                           f"{r.tok_s_per_gpu:.1f}" if r is not None else ""))  # fmt: skip
            cols[2].metric("Concurrency", str(b.max_concurrency),
                           help="the highest of the grid at which both targets hold")
            cols[3].metric(f"TPOT ms ({ans.stat})", f"{b.tpot_ms:.1f}")
            cols[4].metric(f"TTFT ms ({ans.stat})", f"{b.ttft_ms:,.0f}")
        if ans.stat_note():
            st.caption(plain(ans.stat_note().capitalize() + "."))


def pareto_frame(res: PlanResult, ans: SloAnswer, calibrated: bool) -> pd.DataFrame:
    """Every layout's predicted points in the answer's statistic, per user and per GPU."""
    rows = []
    t = ans.targets
    for r in res.layouts:
        cur = r.view(calibrated)
        if cur.why_not:
            continue
        tpot, ttft = latency(cur, "tpot_ms", ans.stat), latency(cur, "ttft_ms", ans.stat)
        rows.append(pd.DataFrame({
            "layout": r.layout.name, "concurrency": cur.concurrency, "tpot_ms": tpot,
            "ttft_ms": ttft, "tokens_per_s_per_user": 1000.0 / tpot,
            "tokens_per_s_per_gpu": cur.tokens_per_s / res.hardware.gpu_count,
            "meets_targets": (tpot <= t.tpot_ms) & (ttft <= t.ttft_ms), "fits": cur.fits,
            "compliant": r.compliant, "hypothesis": r.hypothesis,
        }))  # fmt: skip
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def measured_frame(rows: pd.DataFrame, stat: str, isl: int, osl: int) -> pd.DataFrame:
    """Stored benchmark rows (store.queries.serving.bench_results) as Pareto points: per user
    1000 / TPOT in the answer's statistic, per GPU the output rate over the server's GPUs."""
    cols = {"tpot": f"{stat}_tpot_ms", "ttft": f"{stat}_ttft_ms"}
    need = {*cols.values(), "tp", "pp", "dp", "output_throughput", "layout_label", "engine_label"}
    if rows.empty or not need <= set(rows.columns):
        return pd.DataFrame()
    size = {c: pd.to_numeric(rows[c], errors="coerce") for c in ("tp", "pp", "dp")}
    gpus = size["tp"] * size["pp"].fillna(1) * size["dp"].fillna(1)
    tpot = pd.to_numeric(rows[cols["tpot"]], errors="coerce")
    out = pd.DataFrame({
        "run_id": rows["run_id"], "label": rows["layout_label"] + " (" + rows["engine_label"] + ")",
        "concurrency": rows["concurrency"], "input_len": rows["input_len"],
        "output_len": rows["output_len"], "tpot_ms": tpot,
        "ttft_ms": pd.to_numeric(rows[cols["ttft"]], errors="coerce"),
        "tokens_per_s_per_user": 1000.0 / tpot,
        "tokens_per_s_per_gpu": pd.to_numeric(rows["output_throughput"], errors="coerce") / gpus,
    })  # fmt: skip
    out["same_lengths"] = ((out["input_len"].round() == isl)
                           & (out["output_len"].round() == osl))  # fmt: skip
    return out.dropna(subset=["tokens_per_s_per_user", "tokens_per_s_per_gpu"])


HOVER = ("%{fullData.name}<br>concurrency %{customdata[0]}<br>%{x:.1f} tokens/s per user, "
         "%{y:.1f} per GPU<br>TPOT %{customdata[1]:.2f} ms, TTFT %{customdata[2]:,.0f} ms"
         "<extra></extra>")  # fmt: skip


def pareto_chart(data: pd.DataFrame, measured: pd.DataFrame, ans: SloAnswer) -> go.Figure:
    t = ans.targets
    fig = go.Figure()
    crossings = []
    for i, (name, part) in enumerate(data.groupby("layout", sort=False)):
        color = PALETTE[i % len(PALETTE)]
        comp, hyp = bool(part["compliant"].iloc[0]), bool(part["hypothesis"].iloc[0])
        label = layout_label(name, comp, hyp)
        meets = part["meets_targets"]
        custom = part[["concurrency", "tpot_ms", "ttft_ms"]].to_numpy()
        for keep, extra in ((meets, {"name": label}),
                            (~meets, {"name": label + " (misses a target)", "opacity": 0.3,
                                      "showlegend": False})):  # fmt: skip
            fig.add_scatter(x=part["tokens_per_s_per_user"].where(keep),
                            y=part["tokens_per_s_per_gpu"].where(keep), mode="lines",
                            legendgroup=name, line={"dash": dash(comp, hyp), "color": color},
                            customdata=custom, hovertemplate=HOVER, **extra)  # fmt: skip
        over = part[part["ttft_ms"] > t.ttft_ms]
        if not over.empty:
            crossings.append(over.iloc[0])
    if crossings:
        x = pd.DataFrame(crossings)
        fig.add_scatter(x=x["tokens_per_s_per_user"], y=x["tokens_per_s_per_gpu"], mode="markers",
                        marker={"symbol": "x", "size": 9, "color": "#444"},
                        name=f"TTFT passes {t.ttft_ms:g} ms", text=x["layout"],
                        hovertemplate="%{text}: TTFT over its target from concurrency "
                        "%{customdata}<extra></extra>", customdata=x["concurrency"])  # fmt: skip
    fig.add_vline(x=1000.0 / t.tpot_ms, line_dash="dash", line_color="#888",
                  annotation_text=f"TPOT {t.tpot_ms:g} ms", annotation_position="top left")
    _measured(fig, measured)
    b = ans.best
    if b is not None:
        fig.add_scatter(x=[1000.0 / b.tpot_ms], y=[b.tok_s_per_gpu], mode="markers",
                        marker={"symbol": "star", "size": 18, "color": "gold",
                                "line": {"width": 1, "color": "black"}},
                        name=f"answer: {b.layout} at concurrency {b.max_concurrency}")  # fmt: skip
    fig.update_layout(xaxis_title="tokens/s per user (1000 / TPOT); solid: both targets hold",
                      yaxis_title="output tokens/s per GPU", height=320,
                      margin={"t": 10, "b": 40, "l": 10, "r": 10},
                      legend={"font": {"size": 11}, "tracegroupgap": 0})  # fmt: skip
    return fig


def _measured(fig: go.Figure, measured: pd.DataFrame) -> None:
    """The store's runs of the model on this host: filled where their lengths are the
    plan's, open where not."""
    if measured.empty:
        return
    for (label, same), part in measured.groupby(["label", "same_lengths"], sort=False):
        name = html.escape(f"measured: {label}" + ("" if same else " (other lengths)"))
        fig.add_scatter(x=part["tokens_per_s_per_user"], y=part["tokens_per_s_per_gpu"],
                        mode="markers", name=name,
                        marker={"symbol": "diamond" if same else "diamond-open", "size": 9},
                        customdata=part[["concurrency", "tpot_ms", "ttft_ms"]].to_numpy(),
                        hovertemplate=HOVER)  # fmt: skip


def pareto(res: PlanResult, ans: SloAnswer, measured_rows: pd.DataFrame, host: str | None,
           calibrated: bool) -> None:  # fmt: skip
    """The chart with its exports, and a line on the measured points it shows (or why not)."""
    data = pareto_frame(res, ans, calibrated)
    if data.empty:
        return
    measured = measured_frame(measured_rows, ans.stat, res.isl, res.osl)
    with st.container(key="pareto"):
        ui.chart(pareto_chart(data, measured, ans), data, "tradeoff-pareto"
                 + ("-calibrated" if calibrated else ""))  # fmt: skip
    if ans.best is not None:
        st.caption(plain(ans.runner_up_sentence()))
    if host is None:
        st.caption("Measured points: pick a stored host (its newest `gpu` run) to see its "
                   "serving runs of this model here.")  # fmt: skip
    elif measured.empty:
        st.caption(f"No serving run of {plain(res.model.name)} on {plain(host)} in the store "
                   f"(python -m collectors vllm-bench --results ... --host {plain(host)}).")  # fmt: skip
    else:
        runs = np.unique(measured["run_id"])
        st.caption(f"Measured (diamonds): {len(measured)} point(s) of {len(runs)} stored run(s) "
                   f"on {plain(host)}, in the {ans.stat}; open diamonds ran other lengths.")  # fmt: skip
