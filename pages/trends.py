"""Trends: every measured series over time, its change points and version changes.

The same series, change points and findings as ``python -m collectors check`` (both read
store.queries.series and analysis/trends.py). State in the URL: ``host`` (sidebar),
``show`` (regressions only / chosen series), ``family``, ``min_change`` (percent) and
``series`` (series ids, repeated).
"""

from __future__ import annotations

import streamlit as st

from analysis import regress, trends
from pages.helpers import trend_charts, ui
from pages.helpers.text import md, name, short
from store.errors import StoreError
from store.queries import series as queries_series

REGRESSIONS, CHOSEN = "Regressions only", "Chosen series"
FAMILIES = ("all", "serving", "comm", "trace")
MAX_CHARTS = 24  # a page of charts stays readable; the table lists the rest
FILLED_BY = ("vllm-bench", "nccl-tests", "trace")  # one command per family for the empty page

st.title("Trends")
loc, host = ui.store(), ui.host_filter()
areas = {a.verb: a for a in ui.AREAS}

try:
    listing = queries_series.series_list(loc, host)
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()

if listing.empty:
    st.info("No series yet" + (f" for host {name(host)}" if host else "") + ". A series is one "
            "figure measured run after run at one point: serving TPOT/ITL/TTFT/throughput "
            "(vllm-bench, sglang-bench), collective latency and bus bandwidth (comm, "
            "nccl-tests), step and category times per step (trace, profile, vllm-profile). "
            "Run these nightly to fill them:")  # fmt: skip
    st.code("\n".join(areas[v].command for v in FILLED_BY), language="bash")
    st.stop()

linked = st.query_params.get_all("series")
if "show" not in st.query_params and "show" not in st.session_state:
    st.session_state["show"] = CHOSEN if linked else REGRESSIONS  # the URL alone decides
c1, c2, c3 = st.columns([3, 2, 2])
show = c1.radio("Show", [REGRESSIONS, CHOSEN], key="show", bind="query-params", horizontal=True)
family = c2.selectbox("Family", FAMILIES, key="family", bind="query-params")
min_pct = ui.url_number("Smallest change to mark (%)", "min_change", 0.5, 500.0,
                        regress.MIN_CHANGE * 100, container=c3, step=0.5)  # fmt: skip
if family != "all":
    listing = listing[listing["family"] == family]
labels = {r.series_id: f"{short(r.host)} · {short(r.series)} ({r.runs} runs)"
          for r in listing.itertuples()}  # fmt: skip

if show == CHOSEN:
    # Series ids in the URL (?series=ID&series=ID), written explicitly: a bound widget's
    # default never reaches the URL, and a copied link must keep naming its series.
    options = list(labels) + [s for s in linked if s not in labels]
    if "series_pick" not in st.session_state:
        st.session_state["series_pick"] = linked or options[:1]
    st.session_state["series_pick"] = [s for s in st.session_state["series_pick"] if s in options]
    chosen = st.multiselect("Series", options, key="series_pick",
                            format_func=lambda s: labels.get(s, f"{short(s)} (not in this view)"))  # fmt: skip
    if st.query_params.get_all("series") != chosen:
        st.query_params["series"] = chosen
    missing = [s for s in chosen if s not in labels]
    if missing:
        st.warning(f"Not in this store{' for host ' + name(host) if host else ''}: "
                   f"{', '.join(map(name, missing))}")  # fmt: skip
    ids = [s for s in chosen if s in labels]
else:
    ids = list(labels)

ui.share_link()  # after the URL holds this run's choices (set just above)
points = queries_series.series_points(loc, host, ids)
analysed = trends.analyse(points, min_pct / 100)
found = {f.series_id: f for f in trends.findings(analysed)}
if show == REGRESSIONS:
    shown = [
        t for t in analysed if t.series_id in found and found[t.series_id].kind == "regression"
    ]
    shown.sort(key=lambda t: -abs(found[t.series_id].change))
    better = sum(1 for f in found.values() if f.kind == "improvement")
    if not shown:
        st.success(f"No regression in {len(analysed)} series: no newest level is {min_pct:g}% "
                   f"worse than the one before it" + (f" ({better} improved)." if better else "."))  # fmt: skip
        st.caption("Pick **Chosen series** to look at any series over time.")
        st.stop()
    st.caption(f"{len(shown)} of {len(analysed)} series regressed"
               + (f", {better} improved" if better else "") + ". `python -m collectors check` "
               "reports the same lines.")  # fmt: skip
else:
    shown = analysed

for trend in shown[:MAX_CHARTS]:
    f = found.get(trend.series_id)
    if f is not None:
        (st.error if f.kind == "regression" else st.success)(md(f.line()))
    else:
        st.caption(f"{md(labels.get(trend.series_id, trend.series_id))}: no lasting move of "
                   f"{min_pct:g}% or more.")  # fmt: skip
    ui.chart(trend_charts.figure(trend), trend_charts.table(trend), f"trends-{trend.series_id}")
if len(shown) > MAX_CHARTS:
    st.info(f"{len(shown) - MAX_CHARTS} more series not drawn; narrow the family or host.")
