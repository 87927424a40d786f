"""Serving: measured TPOT and throughput versus concurrency per layout, the planner's
prediction beside them, and a vLLM server's metrics over time.

State in the URL: ``runs`` (absolute vllm-bench run ids, comma-separated), ``model``,
``stat``, ``hw`` (hardware for the prediction: pages/helpers/host_choice.py), ``server`` and
``hours`` (metrics window).
Numbers come from store.queries.serving and planner/; this page only formats them.
"""

from __future__ import annotations

import contextlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import ui
from pages.helpers.serving_metrics import METRICS_AREA, metrics_section
from pages.helpers.serving_metrics import ms as _ms
from pages.helpers.serving_predict import add_band, engine_column
from pages.helpers.text import label, md, name, short
from store import RELABEL_COMMAND, UNKNOWN_HOST
from store.errors import StoreError, StoreMissing
from store.queries import serving as qs

BENCH = next(a for a in ui.AREAS if a.verb == "vllm-bench")
PROFILE = next(a for a in ui.AREAS if a.verb == "vllm-profile")
STATS = ("median", "mean", "p90", "p99")
# The planner's prediction of each statistic (the benchmark's percentiles of the simulated
# requests; the band is drawn around the mean).
PREDICTED = {"median": "predicted_tpot_p50_ms", "mean": "predicted_tpot_ms",
             "p90": "predicted_tpot_p90_ms", "p99": "predicted_tpot_p99_ms"}  # fmt: skip
NO_HW = "(no prediction)"
MEASURED = "measured gpu run of the benchmark's host"
PALETTE = ("#4C78A8", "#E45756", "#54A24B", "#F58518", "#B279A2", "#72B7B2", "#9D755D")


def pick_runs(runs: pd.DataFrame) -> list[str]:
    """Benchmark runs kept in ``?runs=`` as absolute ids (the newest FEW when none given: a
    fleet's hundreds of sweeps are not one chart)."""
    ids = runs["run_id"].tolist()
    wanted = [r for r in (st.query_params.get("runs") or "").split(",") if r]
    missing = [r for r in wanted if r not in ids]
    if missing:
        st.warning(f"Run(s) from the link not in this view: {ui.few([name(r) for r in missing])}")
    current = st.session_state.get("bench_runs")
    if current is None:
        st.session_state["bench_runs"] = [r for r in wanted if r in ids] or ids[:ui.FEW]
    elif any(r not in ids for r in current):  # another model or host: keep what still fits
        st.session_state["bench_runs"] = [r for r in current if r in ids] or ids[:ui.FEW]
    facts = {r.run_id: f"{short(r.engines)} · {short(r.host)} · {short(r.layouts)} · "
                       f"c={_count(r.min_concurrency)}-{_count(r.max_concurrency)}"
             for r in runs.itertuples()}  # fmt: skip
    chosen = st.multiselect("Benchmark runs", ids, key="bench_runs",
                            format_func=lambda rid: f"{rid} ({facts.get(rid, '?')})")  # fmt: skip
    value = ",".join(chosen)
    if st.query_params.get("runs") != value:
        st.query_params["runs"] = value
    return chosen


def planner_layout(row: dict):
    from planner.api import Layout

    kind, tp, dp = row["layout_kind"], int(row["tp"]), int(row["dp"] or 1)
    ep = tp * dp if bool(row["ep"]) else 1
    extra = {"a2a_backend": "allgather_reducescatter"} if kind == "dp_attn_ep" else {}
    return Layout(row["layout"], kind, tp, dp, ep, **extra)


def hardware_for(loc, choice, host: str):
    """(HardwareSpec or None, why not) for a bench host under the chosen ``HostPick``."""
    from planner.api import PlannerInputError, hosts
    from store.queries import planner as qp

    if choice.key == NO_HW:
        return None, "no hardware chosen for the prediction"
    if choice.key != MEASURED:
        return choice.hardware, choice.error or "no host file uploaded"
    if host == UNKNOWN_HOST:  # its runs' files named no machine, so none of its gpu runs
        return None, ("the results name no host: pick the hardware they ran on, or name "
                      f"their host: {RELABEL_COMMAND.format(run_id='RUN_ID')}")  # fmt: skip
    try:
        run_id = qp.latest_gpu_run_id(loc, host)
        if run_id is None:
            return None, (f"host {host!r} has no `gpu` run (run `python -m collectors gpu` "
                          "there, or pick a hardware preset)")  # fmt: skip
        return hosts.from_gpu_run_id(loc, run_id).hardware, None
    except PlannerInputError as exc:
        return None, str(exc)


def pick_hardware(loc, notes: list[str]):
    """The shared host choice (pages/helpers/host_choice.py) with this page's two extra choices."""
    from pages.helpers.host_choice import host_select
    from store.queries import planner as qp

    pick = host_select("Hardware for the planner's prediction", qp.gpu_hosts(loc), notes,
                       before={MEASURED: MEASURED}, after={NO_HW: NO_HW})  # fmt: skip
    if pick.error and pick.key not in (MEASURED, NO_HW):
        st.error(md(pick.error))
    return pick


def model_for(model_id: str):
    from planner.api import models

    norm = "".join(ch for ch in model_id.lower().split("/")[-1] if ch.isalnum())
    for preset in models.MODEL_PRESETS:
        if "".join(ch for ch in preset if ch.isalnum()) in norm:
            return models.preset(preset), None
    return None, (f"model {model_id!r} matches no planner preset ({', '.join(models.MODEL_PRESETS)}); "
                  "the Tradeoff page takes a config.json")  # fmt: skip


def predictions(loc, bench: pd.DataFrame, model_id: str, pick, calibrated: bool):
    """The serving model's TPOT/TTFT/throughput at each measured point (pages/serving_predict)."""
    from pages.helpers.serving_predict import serving_predictions

    def for_host(loc, _key: str, host: str):
        return hardware_for(loc, pick, host)

    return serving_predictions(loc, bench, model_id, pick.key, for_host, model_for, calibrated)


def comm_curves(loc, hw, host: str):
    """As the Tradeoff page's "auto": this host's GPU comm runs, else published / fallback."""
    from planner.api import curves_from_rows
    from store.queries import planner as qp

    runs = qp.comm_runs(loc, host)
    ids = runs["run_id"].tolist() if not runs.empty else []
    if not ids:
        return None
    return curves_from_rows(qp.comm_rows(loc, ids).to_dict("records"), hw.interconnect)


def bench_section(loc, host: str | None) -> None:
    """First screen: the sentence and the measured-vs-predicted TPOT chart; the model, run,
    statistic and hardware pickers below it, then how the prediction was made."""
    models = qs.bench_models(loc, host)
    if not models:
        st.subheader("TPOT and throughput versus concurrency")
        ui.empty_state(BENCH, "No serving benchmarks yet. Import `vllm bench serve "
                       "--save-result` files or logs with its printed results (or run a sweep "
                       "with --url); SGLang's go through `python -m collectors sglang-bench "
                       "--results RESULTS.jsonl --server-args \"--tp 8\"`:")  # fmt: skip
        return
    answer = st.container()
    st.subheader("Runs and prediction")
    model = st.selectbox("Model", models, key="model", bind="query-params")
    runs = qs.bench_runs(loc, host, model)
    chosen = pick_runs(runs)
    if not chosen:
        answer.info("Pick at least one benchmark run below.")
        return
    c1, c2 = st.columns(2)
    stat = c1.radio("Statistic", STATS, key="stat", bind="query-params", horizontal=True)
    calibrated = c1.toggle("Calibrated mode: fit each host's points, check it on points it "
                           "held back", key="calibrate", bind="query-params",
                           help="planner.calibrate, as the Tradeoff page runs it: a few "
                           "seconds per host the first time")  # fmt: skip
    with c2:
        hw_choice = pick_hardware(loc, [])
    bench = qs.bench_results(loc, chosen, model)
    if bench.empty:
        answer.info("These runs hold no results for this model.")
        return
    pred, reasons = predictions(loc, bench, model, hw_choice, calibrated)
    col = f"{stat}_tpot_ms"
    data = bench[["run_id", "host", "engine_label", "layout_label", "layout_kind", "concurrency", col,
                  "output_throughput", "request_throughput", f"{stat}_ttft_ms",
                  f"{stat}_itl_ms", "completed", "failed"]].copy()  # fmt: skip
    data["engine"] = engine_column(bench)
    if not pred.empty:
        data = data.merge(pred, on=["layout_label", "host", "engine", "concurrency"], how="left")
        data["tpot_error_pct"] = 100.0 * (data[col] - data[PREDICTED[stat]]) / data[
            PREDICTED[stat]]  # fmt: skip
    with answer:
        st.subheader("Measured vs predicted TPOT")
        lines = _sentences(data, col, stat)
        if len(lines) <= ui.FEW:
            st.markdown("\n".join(f"- {s}" for s in lines))
        else:
            st.markdown(f"{len(lines)} engine x layout x run sweeps of {md_text(model)}: the "
                        "first five below, every one in the table under the charts.")  # fmt: skip
            st.markdown("\n".join(f"- {s}" for s in lines[:ui.FEW]))
        tpot = versus(data, col, PREDICTED[stat] if not pred.empty else "predicted_tpot_ms",
                      f"{stat} TPOT vs concurrency ({label(model)})", "TPOT (ms)")  # fmt: skip
        ui.chart(tpot, data, "serving-tpot")
    if not pred.empty:
        used = pred.drop_duplicates(["hardware", "comm_source"])
        st.caption("Planner prediction (dashed) for the same model and layout on: " + "; ".join(
            md(f"{r.hardware} ({r.hardware_source}); communication: {r.comm_source}")
            for r in used.itertuples()))  # fmt: skip
        flags = pred.loc[pred["launch_flags"] != ""].drop_duplicates(
            ["layout_label", "host", "engine", "launch_flags"])  # fmt: skip
        if not flags.empty:
            st.caption("Engine scheduler as run (the run's --server-args, or what the server "
                       "reported in /get_server_info): " + "; ".join(
                md(f"{r.engine} {r.layout_label} on {short(r.host)}: {r.launch_flags}")
                for r in flags.itertuples()))  # fmt: skip
        # the band is the held-out error of the mean's prediction: drawn on the mean only
        shaded = "Shaded around each prediction" if stat == "mean" else (
            "Shaded around each prediction of the mean (statistic: mean)")  # fmt: skip
        st.caption(f"{shaded}: where the measured TPOT fell for 80% of the fit's held-out runs"
                   " - " + "; ".join(pred["band"].dropna().unique()))  # fmt: skip
    if reasons:
        st.caption("No prediction for: " + "; ".join(map(md, reasons)))
    if len(lines) > ui.FEW:
        st.dataframe(pd.DataFrame({"sweep": lines}), hide_index=True, width="stretch")
    st.subheader("Output throughput versus concurrency")
    thr = versus(data, "output_throughput", "predicted_tokens_per_s",
                 f"Output throughput vs concurrency ({label(model)})", "tokens/s")  # fmt: skip
    ui.chart(thr, data, "serving-throughput")
    engines_side_by_side(data, col, stat)


def md_text(text: object) -> str:
    """A stored name inside markdown, as inline code (its characters are not markup)."""
    return "`" + str(text).replace("`", "'") + "`"


def engines_side_by_side(data: pd.DataFrame, col: str, stat: str) -> None:
    """When several engines ran the model: their TPOT and throughput per layout and concurrency."""
    if data["engine_label"].nunique() < 2:
        return
    st.markdown(f"**Engines side by side** ({stat} TPOT in ms, output tokens/s):")
    table = data.pivot_table(index=["layout_label", "concurrency"], columns="engine_label",
                             values=[col, "output_throughput"], aggfunc="first")  # fmt: skip
    table.columns = [f"{eng} {'TPOT' if v == col else 'tok/s'}" for v, eng in table.columns]
    table = table.reset_index().rename(columns={"layout_label": "layout"})
    st.dataframe(table, hide_index=True, width="stretch")
    ui.csv_download(table, "serving-engines")


def versus(data: pd.DataFrame, y: str, predicted: str, title: str, y_title: str) -> go.Figure:
    """Measured (solid, markers) and the planner's prediction (dashed), one colour per line."""
    fig = go.Figure()
    groups = data.groupby(["engine_label", "layout_label", "run_id"], sort=False)
    for i, ((engine, layout, run_id), part) in enumerate(groups):
        color, engine, layout = PALETTE[i % len(PALETTE)], label(engine), label(layout)
        fig.add_scatter(x=part["concurrency"], y=part[y], mode="lines+markers",
                        name=f"{engine} {layout} measured ({run_id[-8:]})",
                        line={"color": color})  # fmt: skip
        if predicted in part and part[predicted].notna().any():
            errors = part.get("tpot_error_pct", pd.Series(dtype=float))
            fig.add_scatter(x=part["concurrency"], y=part[predicted], mode="lines",
                            line={"dash": "dash", "color": color}, name=f"{layout} planner",
                            text=[f"TPOT error {e:+.0f}%" for e in errors])  # fmt: skip
            if predicted == "predicted_tpot_ms":  # where 80% of measured runs fell
                add_band(fig, part, color, f"{layout} planner")
        held = part.get("calibrated_tpot_ms")
        if predicted == "predicted_tpot_ms" and held is not None and held.notna().any():
            fig.add_scatter(x=part["concurrency"], y=held, mode="markers",
                            marker={"symbol": "x", "color": color, "size": 9},
                            name=f"{layout} calibrated, held back")  # fmt: skip
    fig.update_layout(title=title, xaxis_type="log", xaxis_title="concurrency",
                      yaxis_title=y_title, height=380, margin={"t": 50, "b": 40})  # fmt: skip
    return fig


def _count(v) -> str:
    return "?" if v is None or pd.isna(v) else f"{int(v)}"


def _at(row) -> str:
    """Where a result sits: its concurrency, or why it has none (older SGLang JSONL with no
    --max-concurrency and no prompt count)."""
    c = row["concurrency"]
    return "(concurrency not recorded)" if pd.isna(c) else f"at concurrency {int(c)}"


def _sentences(data: pd.DataFrame, col: str, stat: str) -> list[str]:
    lines = []
    groups = data.groupby(["engine_label", "layout_label", "run_id"], sort=False)
    for (engine, layout, run_id), part in groups:
        known = part.dropna(subset=["concurrency"])
        low = known.loc[known["concurrency"].idxmin()] if not known.empty else part.iloc[0]
        text = (f"**{name(engine)} · {name(layout)}** (run `{run_id}`): {stat} TPOT "
                f"{_ms(low[col])} {_at(low)}")  # fmt: skip
        thr = part.dropna(subset=["output_throughput"])
        if not thr.empty:
            best = thr.loc[thr["output_throughput"].idxmax()]
            text += f"; peak {best['output_throughput']:,.0f} tok/s {_at(best)}"
        pred = PREDICTED[stat]
        if pred in part and pd.notna(low.get(pred)):
            text += (f"; planner predicts {low[pred]:.1f} ms ({stat}) {_at(low)} "
                     f"(error {low['tpot_error_pct']:+.0f}%)")  # fmt: skip
        lines.append(text + ".")
    return lines


def profile_section(loc, host: str | None) -> None:
    st.subheader("Profiled under load (vllm-profile)")
    runs = qs.profile_runs(loc, host)
    if runs.empty:
        ui.empty_state(PROFILE, "No vLLM profiles yet. Profile a running server (its "
                       "profiler must be enabled):")  # fmt: skip
        return
    top = runs.iloc[0]
    st.markdown(
        f"Newest `{top['run_id']}`: {name(top['model_id'])} on vLLM "
        f"{name(top['vllm_version'] or '?')}, {name(top['layout'] or 'layout unknown')}, "
        f"{int(top['trace_files'])} rank trace(s) (flushed "
        f"in {top['flush_wait_s']:.0f} s); median TPOT {_ms(top['median_tpot_ms'])} with the "
        "profiler on (the Kernel breakdown page shows where its steps go)."
    )
    with contextlib.suppress(Exception):  # the Kernel breakdown page, when this build has it
        st.page_link("pages/kernels.py", label=f"Kernel breakdown of {top['run_id']}",
                     query_params={"run": top["run_id"]}, icon=":material/bar_chart:")  # fmt: skip
    st.dataframe(runs, hide_index=True, width="stretch")
    ui.csv_download(runs, "vllm-profile-runs")


st.title("Serving")
ui.share_link()
loc = ui.store()
host = ui.host_filter()
try:
    bench_section(loc, host)
    metrics_section(loc, host)
    profile_section(loc, host)
except StoreMissing:
    for area in (BENCH, METRICS_AREA, PROFILE):
        ui.empty_state(area)
except StoreError as exc:
    ui.store_problem(exc)
