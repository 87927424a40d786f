"""Overview: hosts, freshness per host x collector, recent runs, and what is still empty."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from pages.helpers import ui
from store import RELABEL_COMMAND, UNKNOWN_HOST
from store.errors import StoreError
from store.queries import overview as queries
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

st.subheader("Hosts")
if shown_hosts.empty and host == UNKNOWN_HOST:
    st.caption("Runs whose files named no host are listed below, under Unknown host.")
elif shown_hosts.empty:
    st.warning(f"No runs from host {host!r} in this store.")
else:
    st.caption(f"{len(shown_hosts)} host(s): " + ", ".join(shown_hosts["host"]))
    table = shown_hosts.assign(
        last_seen=[ui.age(t, now) + " ago" for t in shown_hosts["last_seen_at"]]
    )
    # the host's own inventory (host/gpu runs) apart from the GPUs its imported profiles name
    columns = ["host", "gpu_model", "gpu_count", "cuda_driver", "os", "cpu", "runs", "last_seen"]
    if "imported_gpu_model" in table and table["imported_gpu_model"].notna().any():
        columns.insert(3, "imported_gpu_model")
        st.caption("`gpu_model`/`gpu_count`: the host's own inventory (`collectors host`); "
                   "`imported_gpu_model`: the GPUs named by profiles imported for it.")  # fmt: skip
    st.dataframe(ui.blank(table[columns]), hide_index=True, width="stretch")

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

st.subheader("Freshness")
stale_hours = st.number_input(
    "Stale after (hours)", min_value=1, max_value=24 * 90, value=24, step=1, key="stale_h",
    bind="query-params", help="A collector whose last successful run is older is flagged.",
)  # fmt: skip
if not fresh.empty:
    limit = pd.Timedelta(hours=int(stale_hours))
    fresh = fresh.assign(
        last_ok=[ui.age(t, now) + (" ago" if pd.notna(t) else "") for t in fresh["last_ok_at"]],
        stale=[pd.isna(t) or now - pd.Timestamp(t) > limit for t in fresh["last_ok_at"]],
    )
    stale_count = int(fresh["stale"].sum())
    if stale_count:
        st.warning(f"{stale_count} host x collector pair(s) have no successful run in the last "
                   f"{int(stale_hours)} h.")  # fmt: skip
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
st.caption(
    f"{len(runs)} run(s), newest first"
    + (f"; latest: {runs['run_id'].iloc[0]}" if len(runs) else "")
)
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
    st.subheader("Not collected yet" + (f" on {host}" if host else ""))
    for area in missing:
        ui.empty_state(area)
