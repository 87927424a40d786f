"""Kernel breakdown: where a run's decode step goes, per rank, per step, per kernel.

First screen: the run, the step in a sentence and the per-category breakdown table; the
floors chart and its inputs, communication, step anatomy, per-rank and per-step charts, top
kernels, collective dtypes and the comparison below.

State lives in the URL: ``run`` and ``vs`` hold absolute run ids, ``rank`` the rank the
per-step chart shows. Numbers come from store.queries.trace; this page only formats them.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import floor_view, ui
from pages.helpers.kernel_text import (
    accounting_sentence,
    anatomy_sentences,
    comm_sentences,
    provenance_notes,
)
from pages.helpers.text import label, md, name, short
from store.errors import StoreError, StoreMissing
from store.queries import trace as qt

NONE = "(no comparison)"
MEAN = "mean"
COLORS = {
    "gemm": "#4C78A8", "moe": "#9D755D", "attention": "#F58518", "norm": "#72B7B2",
    "elementwise": "#54A24B", "cast_quant": "#EECA3B", "sampling": "#B279A2",
    "memory": "#BAB0AC", "other": "#D8D8D8", "allreduce": "#E45756", "all_to_all": "#FF9DA6",
    "allgather": "#B82E2E", "reduce_scatter": "#F2A7A7", "other_comm": "#8C3A3A",
}  # fmt: skip
COMMANDS = "python -m collectors profile\npython -m collectors trace PATH"


def share_link_and_stop() -> None:
    with link_slot:
        ui.share_link()
    st.stop()


def empty(what: str) -> None:
    st.info(what + " Profile this machine's built-in MoE decode step, or import "
            "PyTorch-profiler traces (files or a folder of rank traces):")  # fmt: skip
    st.code(COMMANDS, language="bash")


@st.cache_data(max_entries=8, show_spinner=False)
def run_labels(version: str, _runs: pd.DataFrame) -> dict[str, str]:
    """Each run's picker label, "host · label · when · N rank(s)" (a fleet lists 3,600 runs:
    built column-wise, not row by row; stored names shortened for the screen). Kept per
    store version (``_runs``: every trace run of that version, not hashed): both pickers of
    every rerun built them again, 0.08 s each at 10,000 runs."""
    runs = _runs
    named = runs["label"].where(runs["label"].fillna("") != "", runs["verb"])
    when = pd.to_datetime(runs["finished_at"], utc=True).dt.strftime("%Y-%m-%d %H:%M:%S UTC")
    text = (runs["host"].map(short) + " · " + named.map(short) + " · " + when + " · "
            + runs["ranks"].astype(int).astype(str) + " rank(s)")  # fmt: skip
    return dict(zip(runs["run_id"], text, strict=True))


def pick_run(title: str, param: str, runs: pd.DataFrame, labels: dict[str, str], optional: bool,
             exclude: str | None = None) -> str | None:  # fmt: skip
    """A run picker of ``runs`` (shown by ``labels``) whose URL parameter holds the absolute
    run id (never 'latest')."""
    ids = [r for r in runs["run_id"] if r != exclude]
    options = ([NONE] if optional else []) + ids
    key = f"pick_{param}"
    wanted = st.query_params.get(param)
    if wanted == exclude:
        wanted = None  # comparing a run with itself: nothing to compare
    if wanted and wanted not in ids:
        st.warning(f"Run '{name(wanted)}' from the link is not in this store; showing another run.")
        wanted = None
    if st.session_state.get(key) not in options:
        st.session_state[key] = wanted or options[0]
    choice = st.selectbox(title, options, key=key, format_func=lambda r: labels.get(r, r))
    if choice == NONE:
        st.query_params.pop(param, None)
        return None
    st.query_params[param] = choice  # the link always names this exact run
    return choice


def stacked(frame: pd.DataFrame, x: str, y: str, title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    present = set(frame["category"])
    order = [c for c in qt.CATEGORIES if c in present] + sorted(present - set(qt.CATEGORIES))
    for cat in order:
        part = frame[frame["category"] == cat]
        fig.add_bar(x=part[x], y=part[y], name=cat, marker_color=COLORS.get(cat))
    fig.update_layout(barmode="stack", title=title, yaxis_title=y_title, legend_title="category",
                      height=420, margin={"t": 50, "b": 40})  # fmt: skip
    return fig


st.title("Kernel breakdown")
link_slot = st.container()  # the share link is drawn last, once every picker set the URL
loc = ui.store()
host = ui.host_filter()
try:
    all_runs = qt.trace_runs(loc)
except StoreMissing:
    empty("No runs yet.")
    share_link_and_stop()
except StoreError as exc:
    ui.store_problem(exc)
    share_link_and_stop()
if all_runs.empty:
    empty("No kernel breakdowns yet.")
    share_link_and_stop()
runs = all_runs if host is None else all_runs[all_runs["host"] == host]
for param in ("run", "vs"):  # a linked run from another host stays pickable
    linked = st.query_params.get(param)
    if linked and linked not in set(runs["run_id"]) and linked in set(all_runs["run_id"]):
        runs = pd.concat([runs, all_runs[all_runs["run_id"] == linked]])
if runs.empty:
    empty(f"No kernel breakdowns from host '{name(host)}' yet.")
    share_link_and_stop()
run_names = run_labels(ui.version(loc), all_runs)

run_id = pick_run("Run", "run", runs, run_names, optional=False)
assert run_id is not None
info = runs[runs["run_id"] == run_id].iloc[0]
has_gpu = pd.notna(info["has_gpu"]) and bool(info["has_gpu"])
# a NULL read through pandas is NaN, which is truthy: test for it, never `or`
device = info["device_name"] if pd.notna(info["device_name"]) else (
    "GPU" if has_gpu else "CPU only (no GPU events)")  # fmt: skip
backend = info["backend"] if pd.notna(info["backend"]) else "unknown"
st.caption(f"Run `{run_id}` ({name(info['verb'])}) on {name(info['host'])}: "
           f"{int(info['ranks'])} rank(s), backend {name(backend)}, device {name(device)}.")  # fmt: skip
if info["status"] == "partial" or (pd.notna(info["partial"]) and bool(info["partial"])):
    st.warning(f"Partial run: {md(info['message'] or 'a trace was cut short')}")
for note in provenance_notes(info):
    st.caption(note)

summary = qt.category_summary(loc, run_id)
if summary.empty:
    st.info("This run has no steps with categorised time.")
    share_link_and_stop()
top = summary.iloc[0]
st.markdown(
    f"Step: **{top['step_us'] / 1000:.2f} ms** mean wall per step and rank; largest category: "
    f"**{top['category']}** ({top['pct_of_step']:.1f}% of step)."
)
breakdown_slot = st.container()  # the answer's table, above the floors that fill it
floors = floor_view.show(loc, run_id, COLORS)
with breakdown_slot:
    st.subheader("Breakdown")
    st.caption("Per category, per step and rank; the floor is the busiest rank's "
               "(docs/floors.md, the chart below).")  # fmt: skip
    breakdown = summary.drop(columns=["step_us", "is_comm"]).merge(
        floors.drop(columns=["measured_us_per_step", "assumption"]), on="category", how="left")
    st.container(key="breakdown").dataframe(ui.blank(breakdown), hide_index=True, width="stretch")
st.subheader("Communication")
sentences = comm_sentences(summary)
st.markdown("\n".join(f"- {s}" for s in sentences) or "No communication in this run's steps.")
st.subheader("Step anatomy")
anatomy = qt.comm_sources_per_step(loc, run_id)
if anatomy.empty:
    st.caption("No collectives attributed to a module in this run (imported before step "
               "anatomy existed, or no communication).")  # fmt: skip
else:
    st.caption("Each collective by the module that issued it, per step and rank:")
    st.markdown("\n".join(f"- {s}" for s in anatomy_sentences(anatomy)))

st.subheader("Categories per rank")
per_rank = qt.rank_categories(loc, run_id)
per_rank = per_rank.assign(rank_label=[f"rank {r}" for r in per_rank["rank"]])
ui.chart(stacked(per_rank, "rank_label", "us_per_step", "Mean time per step, by rank", "us / step"),
      per_rank.drop(columns="rank_label"), "categories-per-rank")  # fmt: skip
rank_rows = qt.ranks(loc, run_id)
st.dataframe(ui.blank(rank_rows[["rank", "file", "rank_source", "steps", "step_source",
                                 "busy_us", "idle_us", "span_us", "comm_us", "exposed_comm_us",
                                 "outside_calls", "graph_kernels", "partial"]]),
             hide_index=True, width="stretch")  # fmt: skip

st.subheader("Per step")
rank_options = [MEAN, *[str(r) for r in rank_rows["rank"]]]
rank_choice = st.selectbox("Rank for the per-step view (mean = averaged over ranks)",
                           rank_options, key="rank", bind="query-params")  # fmt: skip
rank = None if rank_choice in (None, MEAN) else int(rank_choice)
per_step = qt.step_categories(loc, run_id, rank)
step_names = qt.steps(loc, run_id)
step_names = step_names.drop_duplicates("step")[["step", "name", "source"]].fillna("")
per_step = per_step.merge(step_names, on="step", how="left")
per_step["step_label"] = [label(f"{s}: {n}") for s, n in zip(per_step["step"], per_step["name"],
                                                              strict=True)]  # fmt: skip
who = "mean of ranks" if rank is None else f"rank {rank}"
ui.chart(stacked(per_step, "step_label", "us", f"Time per step by category ({who})", "us"),
      per_step.drop(columns="step_label"), "per-step")  # fmt: skip
if not per_step.empty:
    table = per_step.pivot_table(index=["step", "name", "wall_us"], columns="category",
                                 values="us", aggfunc="sum", fill_value=0).reset_index()  # fmt: skip
    st.caption(f"{len(table)} step(s) ({who}); microseconds per category:")
    st.dataframe(ui.blank(table), hide_index=True, width="stretch")

st.subheader("Outside steps")
outside = qt.outside_steps(loc, run_id)
st.markdown(accounting_sentence(qt.event_counts(loc, run_id), outside)
            or "This run was imported before per-event accounting: import its traces again "
            "to see what ran outside steps.")  # fmt: skip
if not outside.empty:
    st.dataframe(ui.blank(outside), hide_index=True, width="stretch")

st.subheader("Top kernels")
kernels = qt.top_kernels(loc, run_id, limit=25)
if not kernels.empty:
    k0 = kernels.iloc[0]
    st.caption(f"Top: {name(k0['name'])} ({md(k0['category'])}): {k0['total_us']:.0f} us over "
               f"{int(k0['calls'])} call(s), summed over ranks.")  # fmt: skip
    shown = kernels.head(15).iloc[::-1]
    # an nsys export's short name where it has one and it names one bar (the demangled
    # name, always in the table, where several templates share a short name)
    labels = shown["short_name"].where(shown["short_name"].notna(), shown["name"])
    labels = labels.where(~labels.duplicated(keep=False), shown["name"])
    fig = go.Figure(go.Bar(x=shown["total_us"], y=labels.map(label),
                           orientation="h", marker_color=[COLORS.get(c) for c in shown["category"]],
                           customdata=shown["category"],
                           hovertemplate="%{y}<br>%{customdata}: %{x:.0f} us<extra></extra>"))  # fmt: skip
    fig.update_layout(title="Top kernels by total time", xaxis_title="us (all ranks)",
                      height=480, margin={"l": 10, "t": 50})  # fmt: skip
    ui.chart(fig, kernels, "top-kernels")
    st.dataframe(ui.blank(kernels), hide_index=True, width="stretch")

st.subheader("Collective dtypes")
dtypes = qt.collective_dtypes(loc, run_id)
if dtypes.empty:
    st.caption("No collective kernels in this run.")
else:
    st.markdown("\n".join(f"- {md(r['category'])} in **{md(r['dtype'])}**: {int(r['calls'])} call(s), "
                          f"{r['total_us']:.0f} us" for r in dtypes.to_dict("records")))  # fmt: skip
    fig = go.Figure(go.Bar(x=[label(f"{c} / {d}") for c, d in zip(dtypes["category"], dtypes["dtype"],
                                                                strict=True)],
                           y=dtypes["total_us"], marker_color=[COLORS.get(c) for c in
                                                                dtypes["category"]]))  # fmt: skip
    fig.update_layout(title="Collective time by dtype", yaxis_title="us (all ranks)", height=360)
    ui.chart(fig, dtypes, "collective-dtypes")

st.subheader("Compare with another run")
if len(runs) < 2:
    st.caption("Only one run here: profile or import another to compare (e.g. TP vs EP).")
else:
    other = pick_run("Second run (B); this run is A", "vs", runs, run_names, optional=True,
                     exclude=run_id)  # fmt: skip
    if other:
        comp = qt.compare_categories(loc, run_id, other)
        wall = comp[comp["category"] == "(step wall)"]
        cats = comp[comp["category"] != "(step wall)"]
        if not wall.empty:
            w = wall.iloc[0]
            st.markdown(f"Step wall: A **{w['a_us_per_step']:.0f} us** vs B "
                        f"**{w['b_us_per_step']:.0f} us** ({w['delta_us_per_step']:+.0f} us).")  # fmt: skip
        if not cats.empty:
            big = cats.iloc[cats["delta_us_per_step"].abs().argmax()]
            st.markdown(f"Largest change: **{big['category']}** "
                        f"{big['delta_us_per_step']:+.0f} us/step (B - A).")  # fmt: skip
        fig = go.Figure()
        fig.add_bar(x=cats["category"], y=cats["a_us_per_step"], name="A: " + run_id)
        fig.add_bar(x=cats["category"], y=cats["b_us_per_step"], name="B: " + other)
        fig.add_scatter(x=cats["category"], y=cats["delta_us_per_step"], name="B - A",
                        mode="markers", marker={"size": 11, "symbol": "diamond"})  # fmt: skip
        fig.update_layout(barmode="group", title="Per-category time per step, A vs B",
                          yaxis_title="us / step", height=420, legend={"orientation": "h"})  # fmt: skip
        ui.chart(fig, comp, "comparison")
        st.dataframe(ui.blank(comp), hide_index=True, width="stretch")

with link_slot:
    ui.share_link()
