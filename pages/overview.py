"""Overview: hosts, freshness per host x collector, recent runs, and what is still empty."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from pages.helpers import ui
from pages.helpers.text import name
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
shown_hosts = hosts if host is None else hosts[hosts["host"] == host]

st.subheader("Hosts")
if shown_hosts.empty:
    st.warning(f"No runs from host '{name(host)}' in this store.")
else:
    st.caption(f"{len(shown_hosts)} host(s): " + ", ".join(map(name, shown_hosts["host"])))
    table = shown_hosts.assign(
        last_seen=[ui.age(t, now) + " ago" for t in shown_hosts["last_seen_at"]]
    )
    # the host's own inventory (host/gpu runs) apart from the GPUs its imported profiles name
    columns = ["host", "gpu_model", "gpu_count", "cuda_driver", "os", "cpu", "runs", "last_seen"]
    if "imported_gpu_model" in table and table["imported_gpu_model"].notna().any():
        columns.insert(3, "imported_gpu_model")
        st.caption("`gpu_model`/`gpu_count`: the host's own inventory (`collectors host`); "
                   "`imported_gpu_model`: the GPUs named by profiles imported for it.")  # fmt: skip
    st.dataframe(table[columns], hide_index=True, width="stretch")

st.subheader("Freshness")
stale_hours = ui.url_number("Stale after (hours)", "stale_h", 1, 24 * 90, 24, step=1,
                            help="A collector whose last successful run is older is flagged.")
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
    view = fresh[["host", "verb", "last_ok", "runs", "failed_runs", "stale"]]
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
    runs[["run_id", "verb", "status", "label", "host", "age", "duration_s", "message"]],
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
