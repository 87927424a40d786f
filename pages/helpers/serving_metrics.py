"""Serving page, server metrics section: a vLLM or SGLang server's scrapes over time.

Numbers come from store.queries.serving (interval rates and histogram quantiles between
consecutive scrapes); this module only formats them. State in the URL: ``server``, ``hours``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import ui
from store.queries import serving as qs

METRICS_AREA = next(a for a in ui.AREAS if a.verb == "vllm-metrics")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


def metrics_section(loc, host: str | None) -> None:
    st.subheader("Server metrics over time")
    servers = qs.metric_servers(loc, host)
    if servers.empty:
        ui.empty_state(METRICS_AREA, "No metric scrapes yet. Scrape a vLLM server (cron: every "
                       "minute; an SGLang one with `python -m collectors sglang-metrics --url "
                       "http://127.0.0.1:30000`):")  # fmt: skip
        return
    keys = [f"{ENGINE_NAMES.get(r.engine, r.engine)} · {r.host} · {r.url} · "
            f"{r.model_name if isinstance(r.model_name, str) else '(no model label)'}"
            for r in servers.itertuples()]  # fmt: skip
    c1, c2 = st.columns([3, 1])
    choice = c1.selectbox("Server", keys, key="server", bind="query-params")
    hours = ui.url_number("Last hours", "hours", 1, 24 * 90, 24, container=c2, step=1)
    row = servers.iloc[keys.index(choice)]
    # to the minute: a window that moves with every rerun would miss the query cache each
    # time (two queries over a fleet's scrapes: ~0.5 s a render)
    since = (datetime.now(UTC) - timedelta(hours=int(hours))).replace(second=0, microsecond=0)
    engine = row["engine"]
    timeline = qs.metrics_timeline(loc, row["host"], row["url"], row["model_name"], since, engine)
    if timeline.empty:
        st.info(f"No scrape of this server in the last {int(hours)} h (relative to now).")
        return
    # vLLM: per-request TPOT; SGLang: inter-token latency (each engine's older names too)
    hist = qs.per_token_histogram(loc, engine, row["host"], row["url"], row["model_name"])
    per_token = hist[1] if hist else "TPOT"
    data = timeline
    if hist:
        quant = qs.interval_quantiles(loc, row["host"], row["url"], row["model_name"], hist[0],
                                      since)  # fmt: skip
        data = timeline.merge(quant.drop(columns="run_id"), on="scraped_at", how="left")
    last = data.iloc[-1]
    if len(data) > 1:
        since_before = (f"since the scrape before: mean TPOT {ms(last['mean_tpot_ms'])}, mean "
                        f"ITL {ms(last['mean_itl_ms'])}, "
                        f"{_n(last['generation_tokens_per_s'])} generated tok/s.")  # fmt: skip
    else:
        since_before = ("rates and latencies need a second scrape (counters are cumulative; "
                        "cron the same command every minute).")  # fmt: skip
    st.markdown(
        f"{len(data)} scrape(s) in the last {int(hours)} h; newest `{last['run_id']}`: "
        f"{_n(last['running'])} running, {_n(last['waiting'])} waiting, KV cache "
        f"{_pct(last['kv_cache_usage'])}; {since_before}"
    )
    fig = go.Figure()
    fig.add_scatter(x=data["scraped_at"], y=data["running"], name="running", mode="lines+markers")
    fig.add_scatter(x=data["scraped_at"], y=data["waiting"], name="waiting", mode="lines+markers")
    fig.add_scatter(x=data["scraped_at"], y=100 * data["kv_cache_usage"], name="KV cache %",
                    mode="lines", yaxis="y2")  # fmt: skip
    fig.update_layout(title="Requests and KV-cache usage", yaxis_title="requests", height=380,
                      yaxis2={"title": "KV cache %", "overlaying": "y", "side": "right"})  # fmt: skip
    ui.chart(fig, data, "serving-load")
    lat = go.Figure()
    for name, label in (("mean_tpot_ms", "mean TPOT"), ("p50_ms", f"p50 {per_token}"),
                        ("p99_ms", f"p99 {per_token}"), ("mean_itl_ms", "mean ITL")):  # fmt: skip
        if name in data and data[name].notna().any():
            lat.add_scatter(x=data["scraped_at"], y=data[name], name=label, mode="lines+markers")
    lat.update_layout(title=f"{per_token} between scrapes (histogram deltas)", yaxis_title="ms",
                      height=380)  # fmt: skip
    ui.chart(lat, data, "serving-tpot-over-time")


def _n(v) -> str:
    return "-" if v is None or pd.isna(v) else f"{float(v):,.0f}"


def _pct(v) -> str:
    return "-" if v is None or pd.isna(v) else f"{100 * float(v):.0f}%"


def ms(v) -> str:
    return "-" if v is None or pd.isna(v) else f"{float(v):.1f} ms"
