"""The Trends page's figure and export table for one series (display only: levels, shifts
and version changes come from analysis/trends.py)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.trends import ENGINE_NAMES, SeriesTrend, number
from pages.helpers.text import label

REGRESSION, IMPROVEMENT, VERSION = "#E45756", "#54A24B", "#7F7F7F"


def table(trend: SeriesTrend) -> pd.DataFrame:
    """What the chart shows, one row per run: the CSV export."""
    pts = trend.points
    shift_at = {s.index: s for s in trend.shifts}
    versions = {v.index: v.describe() for v in trend.version_changes}
    better = str(trend.first["better"])
    return pd.DataFrame({
        "series_id": pts["series_id"], "host": pts["host"], "series": pts["series"],
        "run_id": pts["run_id"], "measured_at": pts["measured_at"], "value": pts["value"],
        "unit": pts["unit"], "level": trend.levels(),
        "change_point": [shift_at[i].kind(better) if i in shift_at else "" for i in range(len(pts))],
        "change_pct": [round(shift_at[i].change * 100, 2) if i in shift_at else None
                       for i in range(len(pts))],
        "versions_changed": [versions.get(i, "") for i in range(len(pts))],
        "outlier": trend.outliers,
        "engine": pts["engine"], "engine_version": pts["engine_version"], "torch": pts["torch"],
        "nccl": pts["nccl"], "driver": pts["driver"],
    })  # fmt: skip


def _hover(row: pd.Series) -> str:
    engine = (
        ENGINE_NAMES.get(str(row["engine"]), row["engine"]) if pd.notna(row["engine"]) else None
    )
    parts = [f"run {row['run_id']}", f"{number(row['value'])} {row['unit']}"]
    for name, value in ((engine, row["engine_version"]), ("torch", row["torch"]),
                        ("NCCL", row["nccl"]), ("driver", row["driver"])):  # fmt: skip
        if name and pd.notna(value):
            parts.append(f"{name} {value}")
    return "<br>".join(parts)


def figure(trend: SeriesTrend) -> go.Figure:
    """Runs over time, each level's median as a step line, outliers crossed, a solid line
    at every change point (red: regression, green: improvement) and a dotted one at every
    version change."""
    pts = trend.points
    first = trend.first
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=pts["measured_at"], y=pts["value"], mode="lines+markers", name="runs",
        line={"color": "#4C78A8", "width": 1}, marker={"size": 7},
        hovertext=[_hover(r) for _, r in pts.iterrows()], hoverinfo="text",
    ))  # fmt: skip
    fig.add_trace(go.Scatter(
        x=pts["measured_at"], y=trend.levels(), mode="lines", name="level (median)",
        line={"color": "#555555", "dash": "dash", "shape": "hv"}, hoverinfo="skip",
    ))  # fmt: skip
    odd = pts[trend.outliers]
    if len(odd):
        fig.add_trace(go.Scatter(
            x=odd["measured_at"], y=odd["value"], mode="markers", name="outlier (set aside)",
            marker={"symbol": "x", "size": 11, "color": REGRESSION}, hoverinfo="skip",
        ))  # fmt: skip
    better = str(first["better"])
    for shift in trend.shifts:
        x = pts["measured_at"].iloc[shift.index]
        kind = shift.kind(better)
        color = REGRESSION if kind == "regression" else IMPROVEMENT
        fig.add_shape(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1,
                      line={"color": color, "width": 2})  # fmt: skip
        fig.add_annotation(x=x, yref="paper", y=1.0, yanchor="bottom", showarrow=False,
                           font={"color": color},
                           text=f"{kind} {shift.change * 100:+.1f}%")  # fmt: skip
    for change in trend.version_changes:
        x = pts["measured_at"].iloc[change.index]
        fig.add_shape(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1,
                      line={"color": VERSION, "width": 1, "dash": "dot"})  # fmt: skip
        fig.add_annotation(x=x, yref="paper", y=0.0, yanchor="bottom", showarrow=False,
                           font={"color": VERSION, "size": 11}, bgcolor="rgba(255,255,255,0.8)",
                           text=change.describe())  # fmt: skip
    fig.update_layout(
        title=label(f"{first['host']} · {first['series']}", 160), height=380,
        margin={"t": 70, "b": 60}, legend={"orientation": "h", "y": -0.25},
        yaxis_title=f"{first['metric_label']} ({first['unit']})",
        xaxis_title="measured at (UTC)",
    )  # fmt: skip
    return fig
