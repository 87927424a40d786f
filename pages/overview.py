"""Overview: which hosts report, what went stale, the newest regressions, recent runs, and
what is still empty.

First screen: metric cards and a sentence (hosts, stale collectors, regressed series), the
newest regressions `collectors check` finds (first five; all on the Trends page) and the
hosts table; the stale threshold (URL ``stale_h``), the freshness table, the recent runs
(URL ``verb``) and the empty areas below."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from pages.helpers import overview_answer as oa
from pages.helpers import ui
from pages.helpers.text import name
from store import RELABEL_COMMAND, UNKNOWN_HOST
from store.errors import StoreError
from store.queries import overview as queries
from store.queries import series as queries_series
from store.spool.status import human_age, spool_status

st.title("Overview")
ui.share_link()
loc = ui.store()
host = ui.host_filter()

spool = spool_status(loc.spool_dir)  # this machine's spool: runs the store did not take yet
if spool.pending:
    st.warning(
        f"{spool.pending} run(s) are waiting in the spool `{spool.spool_dir}` (oldest "
        f"{human_age(spool.oldest_age_s)} old): the store was busy or unreachable when they "
        "were collected. Commit them with `python -m collectors flush` (see "
        "`python -m collectors doctor`).",
        icon=":material/inbox:",
    )

try:
    hosts = queries.hosts(loc)
    fresh = queries.freshness(loc, host)
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()

if hosts.empty:
    ui.store_problem(StoreError("the store has no runs yet"))
    st.stop()

now = datetime.now(UTC)
# runs whose files named no host are no host of their own: listed apart, below
real_hosts = hosts[hosts["host"] != UNKNOWN_HOST]
shown_hosts = real_hosts if host is None else real_hosts[real_hosts["host"] == host]
answer = st.container()  # cards, sentence and tables: filled once the threshold below is read

st.subheader("Freshness")
stale_hours = int(ui.url_number("Stale after (hours)", "stale_h", 1, 24 * 90, 24, step=1,
                                help="A collector whose last successful run is older is flagged."))
fresh = oa.with_staleness(fresh, now, stale_hours)
stale = fresh[fresh["stale"]]
check = queries_series.latest_check(loc, host)
if check.empty:
    regressed, series, checked_ago = pd.DataFrame(columns=["host"]), None, ""
else:
    info = check.iloc[0]
    regressed = queries_series.check_findings(loc, info["run_id"], host, "regression")
    series = int(info["series"]) if pd.notna(info["series"]) else None
    checked_ago = f"{ui.age(info['finished_at'], now)} ago"

with answer:
    if shown_hosts.empty and host == UNKNOWN_HOST:
        st.caption("Runs whose files named no host are listed below, under Unknown host.")
    elif shown_hosts.empty:
        st.warning(f"No runs from host '{name(host)}' in this store.")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Hosts", f"{len(shown_hosts):,}")
    c2.metric(f"Stale collectors ({stale_hours} h)", f"{len(stale):,}",
              help="host x collector pairs with no successful run in that time")  # fmt: skip
    c3.metric("Regressed series", "-" if check.empty else f"{len(regressed):,}",
              help=f"at the last `{oa.CHECK}` ({checked_ago or 'none yet'})")  # fmt: skip
    c4.metric("Runs", f"{int(shown_hosts['runs'].sum()):,}")
    st.markdown(oa.sentence(len(shown_hosts), stale, None if check.empty else len(regressed),
                            series, stale_hours, checked_ago))  # fmt: skip
    if len(regressed):
        st.caption(f"Newest regressions (first {min(len(regressed), ui.FEW)} of "
                   f"{len(regressed):,}; the Trends page draws them):")  # fmt: skip
        st.container(key="regressions").dataframe(
            oa.regression_table(regressed.head(ui.FEW)), hide_index=True, width="stretch")
    if not shown_hosts.empty:
        table = oa.host_table(shown_hosts, fresh, regressed, lambda t: ui.age(t, now))
        # the host's own inventory (host/gpu runs) apart from the GPUs its imported profiles name
        columns = ["host", "gpu_model", "gpu_count", "runs", "last_seen", "stale_collectors",
                   "regressions", "cuda_driver", "os", "cpu"]  # fmt: skip
        if "imported_gpu_model" in table and table["imported_gpu_model"].notna().any():
            columns.insert(3, "imported_gpu_model")
        st.container(key="hosts").dataframe(ui.blank(table[columns]), hide_index=True,
                                            width="stretch",
                                            height=min(36 + 35 * len(table), 316))  # fmt: skip
        if "imported_gpu_model" in columns:
            st.caption("`gpu_model`/`gpu_count`: the host's own inventory (`collectors host`); "
                       "`imported_gpu_model`: the GPUs named by profiles imported for it.")  # fmt: skip

unknown = queries.unknown_host_runs(loc) if host in (None, UNKNOWN_HOST) else None
if unknown is not None and not unknown.empty:
    st.subheader("Unknown host")
    st.warning(f"{len(unknown)} imported run(s) name no host: their files did not say which "
               "machine recorded them, so they are filed under no real machine's name (not the "
               "one that imported them, `imported_on`) and their GPUs are shown as the files "
               f"name them. Name each one's host: `{RELABEL_COMMAND.format(run_id='RUN_ID')}`.",
               icon=":material/help:")  # fmt: skip
    listed = unknown.assign(age=[ui.age(t, now) + " ago" for t in unknown["finished_at"]])
    st.dataframe(ui.blank(listed[["run_id", "verb", "gpu_model", "gpu_count", "imported_on",
                                  "label", "age"]]), hide_index=True, width="stretch")  # fmt: skip
    st.code("\n".join(RELABEL_COMMAND.format(run_id=r) for r in unknown["run_id"].head(5)),
            language="bash")  # fmt: skip

if not fresh.empty:
    fresh = fresh.assign(
        last_ok=[ui.age(t, now) + (" ago" if pd.notna(t) else "") for t in fresh["last_ok_at"]])
    view = ui.blank(fresh[["host", "verb", "last_ok", "runs", "failed_runs", "stale"]])
    st.dataframe(
        view.style.apply(
            lambda row: ["background-color: #fde2e1" if row["stale"] else "" for _ in row], axis=1
        ),
        hide_index=True,
        width="stretch",
    )

st.subheader("Recent runs")
verbs = (
    ["(all collectors)", *sorted(fresh["verb"].unique().tolist())]
    if not fresh.empty
    else ["(all collectors)"]
)
verb = st.selectbox("Collector", verbs, key="verb", bind="query-params")
runs = queries.recent_runs(loc, host, None if verb == "(all collectors)" else verb, limit=100)
runs = runs.assign(age=[ui.age(t, now) + " ago" for t in runs["finished_at"]])
st.caption(f"{len(runs)} run(s), newest first.")
st.dataframe(
    ui.blank(runs[["run_id", "verb", "status", "label", "host", "age", "duration_s", "message"]]),
    hide_index=True,
    width="stretch",
)
ui.csv_download(runs, "recent-runs")

missing = (
    [a for a in ui.AREAS if a.verb not in set(fresh["verb"])] if not fresh.empty else list(ui.AREAS)
)
if missing:
    st.subheader("Not collected yet" + (f" on {name(host)}" if host else ""))
    for area in missing:
        ui.empty_state(area)
