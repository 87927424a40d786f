"""Figures and curve summaries for the Collectives page (display only; the cliff finder
lives in analysis/comm_curves.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from analysis.comm_curves import Cliff, find_cliff, tokens_equivalent
from pages.helpers.text import label

X_LABELS = {"tokens": "tokens per GPU", "bytes": "message size (bytes, nccl-tests size)"}


@dataclass
class Curve:
    key: str  # run_id|op|dtype
    name: str  # legend
    run_id: str
    op: str
    source: str
    interconnect: str
    points: pd.DataFrame  # sorted by x
    cliff: Cliff | None


def with_x(frame: pd.DataFrame, axis: str, hidden: int) -> pd.DataFrame:
    """Add ``x``: tokens per GPU (measured, or mapped from nccl-tests bytes) or bytes."""
    if axis == "bytes":
        xs = frame["bytes"].astype(float)
    else:
        xs = [
            float(t) if pd.notna(t) else tokens_equivalent(op, b, None if pd.isna(w) else int(w),
                                                           hidden, d)
            for t, op, b, w, d in zip(frame["tokens_per_rank"], frame["op"], frame["bytes"],
                                      frame["world_size"], frame["dtype"], strict=True)
        ]  # fmt: skip
    out = frame.assign(x=list(xs))
    return out[out["x"].notna() & (out["x"] > 0)]


FIGURES = {"per call": "per call: p50 over calls, each call's slowest rank",
           "nccl-tests": "nccl-tests style: burst mean, averaged over ranks"}  # fmt: skip


def as_figure(frame: pd.DataFrame, figure: str) -> pd.DataFrame:
    """Put the chosen figure in the columns the charts draw. ``nccl-tests`` uses comm's
    burst mean averaged over ranks (what nccl-tests reports) and an import's own time, so
    both sources share one axis; comm runs older than that figure drop out."""
    if figure != "nccl-tests" or "nccl_tests_us" not in frame:
        return frame
    out = frame[frame["nccl_tests_us"].notna()].copy()
    out["p50_us"] = out["nccl_tests_us"]
    out["busbw_gbps"] = out["nccl_tests_busbw_gbps"]
    out["p10_us"] = out["p90_us"] = float("nan")  # one mean: no spread to show
    return out


def short(run_id: str) -> str:
    return run_id if len(run_id) <= 24 else run_id[:10] + "…" + run_id[-8:]


def curves(frame: pd.DataFrame) -> list[Curve]:
    """One curve per run x op x dtype over the primary half of each point."""
    out = []
    rows = frame[frame["primary"]]
    for (run_id, op, dtype), pts in rows.groupby(["run_id", "op", "dtype"], sort=True):
        pts = pts.sort_values("x")
        first = pts.iloc[0]
        name = f"{op} {dtype} · {short(run_id)} ({first['host'][:80]}, {first['source']})"
        cliff = find_cliff(pts["x"].tolist(), pts["p50_us"].tolist())
        out.append(Curve(f"{run_id}|{op}|{dtype}", name, run_id, op, first["source"],
                         first["interconnect"] or "unknown", pts, cliff))  # fmt: skip
    return out


def latency_figure(cs: list[Curve], axis: str, title: str) -> go.Figure:
    fig = go.Figure()
    for c in cs:
        p = c.points
        has_band = p["p10_us"].notna().any()
        fig.add_trace(go.Scatter(
            x=p["x"], y=p["p50_us"], name=label(c.name, 160), mode="lines+markers",
            line={"dash": "dash" if c.source == "nccl-tests" else "solid"},
            error_y={"type": "data", "symmetric": False,
                     "array": (p["p90_us"] - p["p50_us"]).tolist(),
                     "arrayminus": (p["p50_us"] - p["p10_us"]).tolist(),
                     "thickness": 1} if has_band else None,
            hovertemplate="%{x:.4g} → %{y:.1f} us<extra>%{fullData.name}</extra>",
        ))  # fmt: skip
        if c.cliff is not None:
            unit = "tok" if axis == "tokens" else "B"
            fig.add_annotation(x=math.log10(c.cliff.x), y=math.log10(c.cliff.latency_us),
                               text=f"cliff {c.op} @ {c.cliff.x:g} {unit} "
                                    f"({c.cliff.latency_us:.0f} us, {c.cliff.ratio:.1f}x)",
                               showarrow=True, arrowhead=2, ax=-40, ay=-30)  # fmt: skip
    fig.update_xaxes(type="log", title=X_LABELS[axis])
    fig.update_yaxes(type="log", title="latency per call, p50 (us); bars p10-p90")
    fig.update_layout(title=title, height=460, legend={"orientation": "h", "y": -0.25},
                      margin={"t": 50})  # fmt: skip
    return fig


def busbw_figure(cs: list[Curve]) -> go.Figure:
    fig = go.Figure()
    for c in cs:
        p = c.points.sort_values("bytes")
        fig.add_trace(go.Scatter(
            x=p["bytes"], y=p["busbw_gbps"], name=label(c.name, 160), mode="lines+markers",
            line={"dash": "dash" if c.source == "nccl-tests" else "solid"},
            hovertemplate="%{x:.4s}B → %{y:.2f} GB/s<extra>%{fullData.name}</extra>",
        ))  # fmt: skip
    fig.update_xaxes(type="log", title="message size (bytes, nccl-tests size)")
    fig.update_yaxes(title="bus bandwidth (GB/s, nccl-tests formula)", rangemode="tozero")
    fig.update_layout(title="Bus bandwidth vs message size", height=420,
                      legend={"orientation": "h", "y": -0.3}, margin={"t": 50})  # fmt: skip
    return fig


def summary_line(c: Curve, axis: str) -> str:
    """One plain sentence of a curve's key numbers (tests and screen readers read it)."""
    p = c.points
    unit = "tokens" if axis == "tokens" else "B"
    lo, hi = p.iloc[0], p.iloc[-1]
    text = (f"{c.name}: {lo['x']:g} {unit} → {lo['p50_us']:.1f} us, {hi['x']:g} {unit} → "
            f"{hi['p50_us']:.1f} us")  # fmt: skip
    bus = p["busbw_gbps"].max()
    if pd.notna(bus):
        text += f"; peak busbw {bus:.2f} GB/s"
    if c.cliff is not None:
        text += "; " + c.cliff.describe(unit)
    else:
        text += "; no cliff: latency stays within 2x of its flat level over this range"
    return text


def summary_table(cs: list[Curve], axis: str) -> pd.DataFrame:
    """The curves' key numbers, one row each (summary_line's figures, for many curves)."""
    rows = []
    for c in cs:
        p = c.points
        rows.append({"curve": c.name, "first x": p["x"].iloc[0], "first us": p["p50_us"].iloc[0],
                     "last x": p["x"].iloc[-1], "last us": p["p50_us"].iloc[-1],
                     "peak busbw GB/s": p["busbw_gbps"].max(),
                     "cliff": c.cliff.describe("tokens" if axis == "tokens" else "B")
                     if c.cliff is not None else ""})  # fmt: skip
    return pd.DataFrame(rows)


def answer_sentence(cs: list[Curve], axis: str) -> str:
    """The chart's answer in one sentence: how many curves, and where latency jumps."""
    unit = "tokens per GPU" if axis == "tokens" else "B"
    cliffs = sorted((c for c in cs if c.cliff is not None), key=lambda c: c.cliff.x)
    runs = len({c.run_id for c in cs})
    text = f"{len(cs)} curve(s) from {runs} run(s): "
    if not cliffs:
        return text + "no latency cliff; every curve stays within 2x of its flat level."
    first = cliffs[0]
    return (text + f"{len(cliffs)} with a latency cliff; the earliest is {first.op} at "
            f"{first.cliff.x:g} {unit} ({first.cliff.latency_us:.0f} us, "
            f"{first.cliff.ratio:.1f}x its flat level).")  # fmt: skip
