"""Expert load: measured routing skew per layer and per EP rank, beside a trace of the model.

State lives in the URL: ``run`` (an absolute expert-load run id; the newest when absent),
``ep`` (the EP size of the per-layer view), ``stat`` (worst layer or mean over layers) and
``trace`` (an absolute trace run id of the same model; the newest such when absent). Every
figure comes from the store (store.queries.experts); the per-rank figures were computed by
the collector with the planner's placements (planner.api.expert_load).
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages.helpers import expert_charts as charts
from pages.helpers import ui
from pages.helpers.text import name, short
from store.errors import StoreError
from store.queries import experts as qe

AREA = next(a for a in ui.AREAS if a.verb == "expert-load")
RECORD = ("python -m collectors expert-load --url http://127.0.0.1:30000 --dump-dir /tmp  "
          "# a server launched with --expert-distribution-recorder-mode stat")  # fmt: skip
STATS = {"worst": ("worst_max_over_mean", "worst layer: busiest rank / mean rank"),
         "mean": ("mean_max_over_mean", "mean over layers: busiest rank / mean rank")}
NONE = "none"


def pick(title: str, param: str, options: list[str], labels: dict[str, str]) -> str:
    """A selectbox whose URL parameter always holds the chosen absolute value (a bound
    widget would drop it at its default, and the link would then mean "newest")."""
    wanted = st.query_params.get(param)
    if wanted and wanted not in options:
        options = [*options, wanted]  # a link to something this store lacks still shows it
        labels = {**labels, wanted: f"{short(wanted)} (not in this store)"}
    key = f"pick_{param}"
    if st.session_state.get(key) not in options:
        st.session_state[key] = wanted or options[0]
    choice = st.selectbox(title, options, key=key, format_func=lambda v: labels.get(v, v))
    if st.query_params.get(param) != choice:
        st.query_params[param] = choice
    return choice


st.title("Expert load")
ui.share_link()
loc = ui.store()
host = ui.host_filter()
try:
    runs = qe.runs(loc, host)
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()
if runs.empty and not st.query_params.get("run"):
    ui.empty_state(AREA, "No expert-load runs" + (f" for host {name(host)}" if host else "") + " yet. "
                   "Import SGLang's expert distribution recorder dumps:")  # fmt: skip
    st.caption("Or record one from a running SGLang server under a short load:")
    st.code(RECORD, language="bash")
    st.stop()

labels = {r.run_id: f"{r.run_id} ({short(r.model_id)}, {r.recorder_mode}, {short(r.host)})"
          for r in runs.itertuples()}  # fmt: skip
run_id = pick("expert-load run", "run", runs["run_id"].tolist(), labels)
head = qe.run(loc, run_id)
if head.empty:
    st.warning(f"Run {name(run_id)} is not an expert-load run in this store.")
    st.stop()
info = head.iloc[0]
counts = qe.counts(loc, run_id)
layers = qe.layers(loc, run_id)
summary = qe.ep_summary(loc, run_id)
routed = layers[layers["max_over_mean"].notna()]
worst = routed.loc[routed["max_over_mean"].idxmax()]
st.markdown(f"**Hottest expert per layer: {routed['max_over_mean'].min():.1f}x to "
            f"{worst['max_over_mean']:.1f}x the layer's mean expert** (worst: layer "
            f"{int(worst['layer'])}, expert {int(worst['hottest_expert'])}).")  # fmt: skip

st.subheader("Layers x experts")
fig, data = charts.heatmap(counts, f"Tokens per expert over its layer's mean, run {run_id}")
ui.chart(fig, data, f"expert-heatmap-{run_id}")
# what was recorded, under the answer (first screen: the sentence and the heatmap)
files = [name(f) for f in json.loads(info["files"] or "[]")]
files = ui.few(files, "more files") if files else "no files recorded"
st.caption(f"{name(info['model_id'])} ({info['num_layers']} layers, {info['num_experts']} routed "
           f"experts top-{info['top_k']}, {info['dense_layers']} dense), "
           f"{name(info['recorder_mode'])} recording on {name(info['host'])}, "
           f"{ui.age(info['finished_at'])} ago; {files}")  # fmt: skip
if info["layer_total_spread"] and info["layer_total_spread"] > 0:
    st.caption(f"Per-layer totals differ by up to {info['layer_total_spread']:.3%} (accepted: "
               "each layer's figures use its own total).")  # fmt: skip

st.subheader("Imbalance per layer")
ui.chart(charts.layer_bars(layers), layers, f"expert-layers-{run_id}")

st.subheader("Busiest EP rank per EP size")
st.caption("Each EP size that divides the expert count: the busiest rank's tokens over the "
           "mean rank's, with experts placed contiguously (vLLM's and SGLang's default), "
           "balanced by this load (EPLB-style greedy packing), and under the recorded map when "
           "the run has one.")  # fmt: skip
stat = st.segmented_control("Figure", list(STATS), default="worst", key="stat",
                            bind="query-params",
                            format_func=lambda s: STATS[s][1])  # fmt: skip
column, words = STATS[stat or "worst"]
ui.chart(charts.ep_bars(summary, column, words), summary, f"expert-ep-{run_id}")

sizes = [str(x) for x in sorted(summary["ep_size"].unique())]
default_ep = "8" if "8" in sizes else sizes[0]
ep = st.selectbox("EP size, per layer", sizes, index=sizes.index(default_ep), key="ep",
                  bind="query-params")  # fmt: skip
ranks = qe.ranks(loc, run_id, int(ep))
ui.chart(charts.rank_lines(ranks, int(ep)), ranks, f"expert-ranks-ep{ep}-{run_id}")
at = summary[summary["ep_size"] == int(ep)].set_index("placement")
line = [f"{charts.PLACEMENT_WORDS.get(p, p)}: {at.loc[p, 'worst_max_over_mean']:.2f}x in the "
        f"worst layer, {at.loc[p, 'mean_max_over_mean']:.2f}x on average" for p in at.index]
st.caption(f"At EP={ep}: " + "; ".join(line) + ".")

st.subheader("Beside a trace of the same model")
try:
    traces = qe.model_traces(loc, str(info["model_id"]))
except StoreError:
    traces = pd.DataFrame()
if traces.empty:
    st.info(f"No profiled trace of {name(info['model_id'])} in this store. A profile of the same "
            "model under load shows the MoE and all-to-all time this skew drives:")  # fmt: skip
    st.code("python -m collectors sglang-profile --url http://127.0.0.1:30000 --trace-dir "
            "TRACE_DIR", language="bash")  # fmt: skip
else:
    options = traces["run_id"].tolist()
    tlabels = {r.run_id: f"{r.run_id} ({r.verb}, {short(r.model_id)}, {short(r.host)})"
               for r in traces.itertuples()}  # fmt: skip
    trace_id = pick("Trace run", "trace", options, tlabels)
    row = traces[traces["run_id"] == trace_id]
    if row.empty:
        st.warning(f"Trace run {name(trace_id)} is not a profile of {name(info['model_id'])} "
                   "here.")  # fmt: skip
    else:
        tr = pd.concat([row.iloc[0], qe.trace_figures(loc, trace_id).iloc[0]])
        fig, data = charts.trace_bars(tr)
        ui.chart(fig, data, f"expert-trace-{trace_id}")
        share = 100 * tr["moe_ms"] / tr["step_ms"] if tr["step_ms"] else float("nan")
        st.caption(f"MoE kernels {tr['moe_ms']:.2f} ms ({share:.0f}% of a {tr['step_ms']:.2f} ms "
                   f"step), all-to-all {tr['all_to_all_ms']:.2f} ms per step. Under EP each MoE "
                   "layer waits for its busiest rank: the factors above multiply that rank's "
                   "tokens.")  # fmt: skip

eplb = qe.eplb_balancedness(loc)
if not eplb.empty:
    st.subheader("vLLM EPLB balancedness (vllm-metrics scrapes)")
    st.caption("vLLM reports no per-expert counts, only per-layer balancedness (mean rank / "
               "busiest rank) at its own EP size and placement: 1 / balancedness is the "
               "busiest rank over the mean rank, as above.")  # fmt: skip
    st.dataframe(eplb, hide_index=True, width="stretch")
    ui.csv_download(eplb, "vllm-eplb-balancedness")
