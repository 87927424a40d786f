"""Trends: every measured series over time, its change points and version changes.

First screen (Regressions only, the default): what the newest ``python -m collectors check``
found, "N of M series regressed", and the regressed series' charts, drawn from the points
the check kept (migration 0016: a fleet's ~50,000 series are minutes of analysis, a job for
the nightly check, not for a page). Chosen series: any series' points from the series
views, analysed here (store.queries.series, analysis/trends.py, as ``check``). State in the
URL: ``host`` (sidebar), ``show`` (regressions only / chosen series), ``family``,
``min_change`` (percent) and ``series`` (series ids, repeated).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import streamlit as st

from analysis import regress, trends
from pages.helpers import trend_charts, ui
from pages.helpers.text import md, name, short
from store.errors import StoreError
from store.queries import series as queries_series

REGRESSIONS, CHOSEN = "Regressions only", "Chosen series"
FAMILIES = ("all", "serving", "comm", "trace")
MAX_CHARTS = 24  # chosen series: a page of charts stays readable
FIRST_CHARTS = 6  # regressions: the newest moves drawn (~0.1 s a chart), all of them in a table
FILLED_BY = ("vllm-bench", "nccl-tests", "trace")  # one command per family for the empty page

CHECK = "python -m collectors check"

st.title("Trends")
loc, host = ui.store(), ui.host_filter()
areas = {a.verb: a for a in ui.AREAS}

try:
    fed = queries_series.series_runs(loc, host)
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()

if not fed:
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


def draw(shown: list, found: dict, labels: dict[str, str], limit: int = MAX_CHARTS) -> None:
    for trend in shown[:limit]:
        f = found.get(trend.series_id)
        if f is not None:
            (st.error if f.kind == "regression" else st.success)(md(f.line()))
        else:
            st.caption(f"{md(labels.get(trend.series_id, trend.series_id))}: no lasting move of "
                       f"{min_pct:g}% or more.")  # fmt: skip
        ui.chart(trend_charts.figure(trend), trend_charts.table(trend), f"trends-{trend.series_id}")
    if len(shown) > limit:
        st.info(f"{len(shown) - limit} more series not drawn; narrow the family or host.")


if show == REGRESSIONS:
    ui.share_link()
    check = queries_series.latest_check(loc, host)
    if check.empty:
        st.info(f"No `{CHECK}` has run on this store yet" + (f" for host {name(host)}" if host else "")
                + ": it compares the newest level of every series with the one before and "
                "keeps what moved for this page and the Overview. Run it nightly (docs/cron.md):")  # fmt: skip
        st.code(CHECK, language="bash")
        st.caption("Pick **Chosen series** to look at any series over time.")
        st.stop()
    info = check.iloc[0]
    every = queries_series.check_findings(loc, info["run_id"], host)
    if family != "all":
        every = every[every["family"] == family]
    every = every[every["change"].abs() * 100 >= min_pct]
    regressed = every[every["kind"] == "regression"]
    better = int((every["kind"] == "improvement").sum())
    when = f"{ui.age(info['finished_at'], datetime.now(UTC))} ago"
    checked = f"{int(info['series']):,} series" if info["series"] == info["series"] else "series"
    if regressed.empty:
        st.success(f"No regression in {checked} at the last check ({when}): no newest level "
                   f"is {min_pct:g}% worse than the one before it"
                   + (f" ({better} improved)." if better else "."))  # fmt: skip
        st.caption("Pick **Chosen series** to look at any series over time.")
        st.stop()
    st.caption(f"{len(regressed):,} of {checked} regressed at the last check ({when}, run "
               f"{info['run_id']})" + (f", {better:,} improved" if better else "") +
               f". `{CHECK}` reports the same lines.")  # fmt: skip
    ids = regressed["series_id"].tolist()[:FIRST_CHARTS]
    points = queries_series.check_points(loc, info["run_id"], ids)
    by_series = {sid: part for sid, part in points.groupby("series_id", sort=False)}
    rows = regressed.set_index("series_id")
    shown = [trends.stored_trend(by_series[sid], json.loads(rows.loc[sid, "shifts"]))
             for sid in ids if sid in by_series]  # fmt: skip
    draw(shown, {t.series_id: trends.finding(t) for t in shown}, {})
    if len(regressed) > len(shown):
        st.subheader(f"Every regression ({len(regressed):,})")
        st.caption("The newest first; pick **Chosen series** (or copy a series id into the link, "
                   "`?series=ID`) to draw any of them.")  # fmt: skip
        table = regressed.assign(change_pct=(regressed["change"] * 100).round(1))
        st.dataframe(table[["host", "series", "before", "after", "unit", "change_pct",
                            "since_run_id", "since_at", "runs_since", "versions_changed",
                            "series_id"]], hide_index=True, width="stretch")  # fmt: skip
    st.stop()

listing = queries_series.series_list(loc, host)
if family != "all":
    listing = listing[listing["family"] == family]
labels = {r.series_id: f"{short(r.host)} · {short(r.series)} ({r.runs} runs)"
          for r in listing.itertuples()}  # fmt: skip
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
               f"{ui.few([name(s) for s in missing])}")  # fmt: skip
ids = [s for s in chosen if s in labels]
ui.share_link()  # after the URL holds this run's choices (set just above)
analysed = trends.analyse(queries_series.series_points(loc, host, ids), min_pct / 100)
draw(analysed, {f.series_id: f for f in trends.findings(analysed)}, labels)
