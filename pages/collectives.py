"""Collectives: latency vs tokens per GPU (log-log) with the latency cliff, busbw vs size,
PCIe and NVLink hosts side by side, comm benchmarks and nccl-tests imports on one axis.

First screen: a sentence and the latency chart; the run, op, axis and figure pickers (URL:
``runs``, ``ops``, ``x``, ``hidden``, ``figure``) sit below it, then the curves' numbers,
the bus bandwidth chart and the points."""

from __future__ import annotations

import streamlit as st

from pages.helpers import comm_charts as charts
from pages.helpers import ui
from pages.helpers.text import md, name
from store.errors import StoreError
from store.queries import comm as queries_comm

st.title("Collectives")
ui.share_link()
loc = ui.store()
host = ui.host_filter()
AREAS = {a.verb: a for a in ui.AREAS}

try:
    runs = queries_comm.comm_runs(loc, host)
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()

if runs.empty:
    ui.empty_state(AREAS["comm"], "No collective runs" + (f" for host {name(host)}" if host else "")
                   + " yet. Measure this host's curves (gloo on CPU, NCCL on GPUs):")  # fmt: skip
    st.caption("Or import nccl-tests output you already have (text logs of any era, or -J JSON):")
    st.code(AREAS["nccl-tests"].command, language="bash")
    st.stop()

answer = st.container()  # the sentence and the latency chart, drawn once the pickers ran
st.subheader("Runs and axes")
# Absolute run ids in the URL (?runs=ID&runs=ID): a first visit without them selects the
# newest run by id, so a copied link keeps showing that run after newer ones arrive. The
# widget is not URL-bound because a bound default never reaches the URL.
options = runs["run_id"].tolist()
linked = st.query_params.get_all("runs")
options += [r for r in linked if r not in options]  # keep unknown ids visible, not dropped
if "run_pick" not in st.session_state:
    st.session_state["run_pick"] = linked or options[:1]
st.session_state["run_pick"] = [r for r in st.session_state["run_pick"] if r in options]
selected = st.multiselect("Runs", options, key="run_pick",
                          help="comm benchmarks and nccl-tests imports; newest first")  # fmt: skip
if st.query_params.get_all("runs") != selected:
    st.query_params["runs"] = selected
missing = [r for r in selected if r not in set(runs["run_id"])]
if missing:
    st.warning(f"Not in this store{' for host ' + name(host) if host else ''}: "
               f"{ui.few([name(r) for r in missing])}")  # fmt: skip

info = runs[runs["run_id"].isin(selected)]
if info.empty:
    with answer:
        st.info("Select one or more runs below.")
    st.stop()

frame = queries_comm.comm_results(loc, selected)
all_ops = sorted(frame["op"].unique().tolist())
c1, c2, c3, c4 = st.columns([3, 2, 2, 3])
ops = c1.multiselect("Ops", all_ops, default=all_ops, key="ops", bind="query-params")
axis = c2.radio("Latency x-axis", ["tokens", "bytes"], key="x", bind="query-params",
                horizontal=True, help="tokens per GPU (serving terms) or nccl-tests bytes")  # fmt: skip
hidden = ui.url_number("Hidden size (maps byte sizes to tokens)", "hidden", 1, 1_000_000, 7168,
                       container=c3, step=1)  # fmt: skip

figure = c4.radio("Figure", list(charts.FIGURES), key="figure", bind="query-params",
                  horizontal=True, help="comm's own per-call percentiles, or the figure "
                  "nccl-tests prints (imports show the same in both)")  # fmt: skip
st.dataframe(
    info[["run_id", "host", "source", "backend", "world_size", "device", "interconnect",
          "graph_mode", "gpu_names", "ops", "points", "label", "finished_at"]],
    hide_index=True, width="stretch",
)  # fmt: skip
frame = charts.as_figure(frame, figure)
shown = charts.with_x(frame[frame["op"].isin(ops)], axis, int(hidden))
cs = charts.curves(shown)
if not cs:
    with answer:
        st.info("No points to draw for these ops on this axis (byte sweeps of ops without a "
                "token mapping show on the bytes axis).")  # fmt: skip
    st.stop()

with answer:
    st.markdown(charts.answer_sentence(cs, axis))
    st.subheader("Latency per call" + (" vs tokens per GPU" if axis == "tokens" else " vs size"))
    st.caption(f"Figure: {charts.FIGURES[figure]}.")
    if axis == "tokens" and (frame["tokens_per_rank"].isna() & frame["op"].isin(ops)).any():
        st.caption(f"Byte-sized points (nccl-tests, --bytes sweeps) are placed at the tokens per "
                   f"GPU they carry with hidden {int(hidden)} and each row's dtype.")  # fmt: skip
    classes = sorted({c.interconnect for c in cs})
    columns = st.columns(len(classes)) if len(classes) > 1 else [st.container()]
    for column, klass in zip(columns, classes, strict=True):
        group = [c for c in cs if c.interconnect == klass]
        fig = charts.latency_figure(group, axis, f"Interconnect: {klass}")
        with column:
            st.plotly_chart(fig, key=f"latency-{klass}")
            ui.html_download(fig, f"collectives-latency-{klass}")

st.subheader("Curves")
if len(cs) <= ui.FEW:
    st.markdown("\n".join(f"- {md(charts.summary_line(c, axis))}" for c in cs))
else:
    st.caption(f"{len(cs)} curves, one row each:")
    st.dataframe(charts.summary_table(cs, axis), hide_index=True, width="stretch")
points = shown[["run_id", "host", "source", "interconnect", "op", "dtype", "in_place",
                "tokens_per_rank", "x", "bytes", "count", "p50_us", "p10_us", "p90_us",
                "min_us", "mean_us", "algbw_gbps", "busbw_gbps", "nccl_tests_us", "wrong"]]  # fmt: skip
ui.csv_download(points, "collectives-latency")

st.subheader("Bus bandwidth vs message size")
fig = charts.busbw_figure(cs)
st.plotly_chart(fig, key="busbw")
b1, b2 = st.columns(2)
with b1:
    ui.csv_download(points[["run_id", "op", "dtype", "in_place", "bytes", "algbw_gbps",
                            "busbw_gbps"]], "collectives-busbw")  # fmt: skip
with b2:
    ui.html_download(fig, "collectives-busbw")

st.subheader("Points")
st.dataframe(points, hide_index=True, width="stretch")
nccl_runs = info[info["source"] == "nccl-tests"]
footers = [(row.run_id, row.avg_busbw_gbps, row.footer_avg_busbw_gbps, row.file)
           for row in nccl_runs.itertuples()]  # fmt: skip
if len(footers) <= ui.FEW:
    for run_id, mean, footer, file in footers:
        told = "absent" if footer != footer else f"{footer:.2f} GB/s"  # NaN: no footer in the file
        st.caption(f"nccl-tests {run_id}: mean busbw over both halves {mean:.2f} GB/s (file's "
                   f"footer: {told}); {name(file)}")  # fmt: skip
else:
    st.caption(f"{len(footers)} nccl-tests runs: mean busbw over both halves and the file's "
               "footer (blank: none in the file):")  # fmt: skip
    st.dataframe(nccl_runs[["run_id", "avg_busbw_gbps", "footer_avg_busbw_gbps", "file"]],
                 hide_index=True, width="stretch")  # fmt: skip
