"""Plotly figures of the Expert load page: what the store holds, drawn; no arithmetic beyond
dividing a count by its layer's mean for the heatmap's colour."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

PLACEMENT_WORDS = {"contiguous": "contiguous (engine default)",
                   "balanced": "balanced (EPLB-style packing)",
                   "recorded": "recorded placement map"}  # fmt: skip
COLOURS = {"contiguous": "#d62728", "balanced": "#2ca02c", "recorded": "#1f77b4"}


def heatmap(counts: pd.DataFrame, title: str) -> tuple[go.Figure, pd.DataFrame]:
    """Layers x experts, coloured by each expert's tokens over its layer's mean expert (a
    dense layer stays blank); the frame is what it draws."""
    grid = counts.pivot(index="layer", columns="expert", values="count").sort_index()
    mean = grid.mean(axis=1).replace(0, np.nan)
    rel = grid.div(mean, axis=0)
    data = counts.assign(over_mean=counts["count"] / counts["layer"].map(mean))
    top = float(np.nanpercentile(rel.to_numpy(), 99.5)) if rel.notna().any().any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=rel.to_numpy(), x=rel.columns.tolist(), y=rel.index.tolist(), zmin=0,
        zmax=max(top, 2.0), colorscale="Inferno", colorbar={"title": "x mean"},
        hovertemplate="layer %{y}, expert %{x}: %{z:.2f}x the layer's mean expert<extra></extra>",
    ))  # fmt: skip
    fig.update_layout(title=title, xaxis_title="logical expert", yaxis_title="layer",
                      yaxis_autorange="reversed", height=440, margin={"t": 50})  # fmt: skip
    return fig, data


def layer_bars(layers: pd.DataFrame) -> go.Figure:
    routed = layers[layers["max_over_mean"].notna()]
    fig = go.Figure(go.Bar(
        x=routed["layer"], y=routed["max_over_mean"], marker_color="#9467bd",
        customdata=routed["hottest_expert"],
        hovertemplate="layer %{x}: hottest expert %{customdata} at %{y:.2f}x the mean<extra></extra>",
    ))  # fmt: skip
    fig.update_layout(title="Hottest expert over the mean expert, per layer", xaxis_title="layer",
                      yaxis_title="max / mean tokens per expert", height=360)  # fmt: skip
    return fig


def ep_bars(summary: pd.DataFrame, column: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    for placement, rows in summary.groupby("placement", sort=False):
        fig.add_bar(x=rows["ep_size"].astype(str), y=rows[column],
                    name=PLACEMENT_WORDS.get(placement, placement),
                    marker_color=COLOURS.get(placement))  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    fig.update_layout(barmode="group", xaxis_title="EP size (ranks)", yaxis_title=y_title,
                      xaxis_type="category", height=380, title="Busiest EP rank over the mean "
                      "rank, by EP size")  # fmt: skip
    return fig


def rank_lines(ranks: pd.DataFrame, ep: int) -> go.Figure:
    fig = go.Figure()
    for placement, rows in ranks.groupby("placement", sort=False):
        fig.add_scatter(x=rows["layer"], y=rows["max_over_mean"], mode="lines+markers",
                        name=PLACEMENT_WORDS.get(placement, placement),
                        line_color=COLOURS.get(placement))  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    fig.update_layout(title=f"Busiest rank over the mean rank per layer at EP={ep}",
                      xaxis_title="layer", yaxis_title="max / mean tokens per rank",
                      height=360)  # fmt: skip
    return fig


def trace_bars(trace: pd.Series) -> tuple[go.Figure, pd.DataFrame]:
    data = pd.DataFrame({"what": ["MoE kernels", "all-to-all (incl. AllGather + "
                                  "ReduceScatter)", "AllReduce", "whole step"],
                         "ms_per_step": [trace["moe_ms"], trace["all_to_all_ms"],
                                         trace["allreduce_ms"], trace["step_ms"]]})  # fmt: skip
    fig = go.Figure(go.Bar(x=data["ms_per_step"], y=data["what"], orientation="h",
                           marker_color=["#ff7f0e", "#1f77b4", "#17becf", "#7f7f7f"]))  # fmt: skip
    fig.update_layout(title=f"Trace run {trace['run_id']}: milliseconds per step",
                      xaxis_title="ms per step (mean over ranks and steps)", height=300,
                      yaxis_autorange="reversed")  # fmt: skip
    return fig, data
