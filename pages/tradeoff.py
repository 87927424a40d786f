"""Tradeoff calculator: which layout gives the best TPOT and throughput at full precision.

State lives in the URL: ``setup`` (the published reference case or a model + host), ``model``
(a preset or ``run:<run id>`` whose arguments record the model),
``hw`` (pages/helpers/host_choice.py), ``comm`` (an absolute comm run id), ``calib`` (``host``:
the stored host's runs of the model; or an absolute trace run id), ``layouts``,
``cmin``/``cmax``, ``isl``/``osl`` (the benchmark's input / output lengths: every layout is
predicted for ``vllm bench serve`` at them), ``at`` and ``experts`` (``uniform`` routing or
an absolute expert-load run id). Numbers come from planner.plan (the one serving model, each
prediction with its measured-error band); this page only formats them.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages.helpers import ui
from pages.helpers.host_choice import host_select
from pages.helpers.text import md, name
from pages.helpers.tradeoff_view import render
from planner.api import (
    ExpertLoad,
    PlannerInputError,
    PlanResult,
    curves_from_rows,
    default_layouts,
    hardware,
    measurements,
    models,
    plan,
    reference,
)
from store.errors import StoreError
from store.queries import experts as qe
from store.queries import planner as qp

REF = reference.NAME
CUSTOM = "custom"
AUTO = "auto"
NONE = "none"
UNIFORM = "uniform"
HOST = "host"


def url_select(title: str, param: str, options: list[str], labels: dict[str, str],
               help: str | None = None) -> str:  # fmt: skip
    """A selectbox whose URL parameter always holds the chosen (absolute) value."""
    key = f"pick_{param}"
    wanted = st.query_params.get(param)
    if wanted and wanted not in options:
        st.warning(f"{title} '{name(wanted)}' from the link is not available here; showing another.")
        wanted = None
    if st.session_state.get(key) not in options:
        st.session_state[key] = wanted or options[0]
    choice = st.selectbox(title, options, key=key, help=help,
                          format_func=lambda v: labels.get(v, v))  # fmt: skip
    st.query_params[param] = choice
    return choice


def store_frames() -> tuple[pd.DataFrame, ...]:
    """Stored GPU hosts, comm runs, trace breakdowns and recorded models (empty without a
    store), and a note saying why."""
    loc = ui.store()
    try:
        frames = (qp.gpu_hosts(loc), qp.comm_runs(loc), qp.trace_breakdowns(loc),
                  qp.run_models(loc))  # fmt: skip
        return (*frames, "")
    except StoreError as exc:
        empty = pd.DataFrame()
        return empty, empty, empty, empty, f"store not readable ({exc}): presets only"


def model_options(recorded: pd.DataFrame) -> tuple[dict[str, str], dict[str, object]]:
    """Presets, then models recorded in runs (``run:<id>``) that the planner can read."""
    labels = {n: f"{n} (preset)" for n in models.MODEL_PRESETS}
    metas: dict[str, object] = {}
    for row in recorded.to_dict("records"):
        try:
            meta = json.loads(row["model"])
        except (TypeError, ValueError):
            continue
        if isinstance(meta, str) and models.preset_for_name(meta) is None:
            continue
        name = meta if isinstance(meta, str) else meta.get("name", "model")
        key = f"run:{row['run_id']}"
        labels[key] = f"{name} as recorded by {row['verb']} run {row['run_id']}"
        metas[key] = meta
    return labels, metas


def expert_routing(model) -> ExpertLoad | None:
    """``experts``: uniform top-k routing, or a stored expert-load run of this model's shape
    (python -m collectors expert-load) that prices the busiest EP rank instead."""
    try:
        runs = qe.runs(ui.store())
    except StoreError:
        return None
    fits = runs[(runs["num_layers"] == model.num_layers)
                & (runs["num_experts"] == model.num_experts)] if not runs.empty else runs  # fmt: skip
    opts = {UNIFORM: "uniform top-k (assumed)"}
    for row in fits.to_dict("records"):
        opts[row["run_id"]] = (f"measured: {row['run_id']} ({row['model_id']}, "
                               f"{row['recorder_mode']}, {row['host']})")  # fmt: skip
    pick = url_select("Expert routing", "experts", list(opts), opts,
                      help="A measured expert load (python -m collectors expert-load) prices "
                      "the busiest EP rank's expert reads and tokens from the recorded "
                      "distribution, experts placed contiguously; the findings say what a "
                      "balanced placement would win.")  # fmt: skip
    if pick == UNIFORM:
        return None
    counts = qe.count_matrix(ui.store(), pick)
    row = fits[fits["run_id"] == pick].iloc[0]
    return ExpertLoad(counts, source=f"expert-load run {pick} ({row['model_id']}, "
                      f"{row['recorder_mode']})", run_id=pick)  # fmt: skip


def inputs() -> tuple[dict, list[str]]:
    """Widgets -> plan() keyword arguments, and notes on where each input came from."""
    notes: list[str] = []
    setups = {REF: "Reference case: Kimi-K2.5 on 8x RTX PRO 6000 (published figures)",
              CUSTOM: "Choose a model and a host"}  # fmt: skip
    setup = url_select("Setup", "setup", list(setups), setups)
    hosts, comm_runs, traces, recorded, problem = store_frames()
    if problem:
        notes.append(problem)
    if setup == REF:
        st.caption("Published figures of the profiling write-up (REFERENCE §1), labelled as "
                   "such and never mixed with measured runs.")  # fmt: skip
        return {"model": models.preset(reference.MODEL), "hardware": hardware.preset(
            reference.HOST), **reference.plan_kwargs()}, notes  # fmt: skip
    c1, c2 = st.columns(2)
    with c1:
        labels, metas = model_options(recorded)
        pick = url_select("Model", "model", list(labels), labels)
        model_arg = pick
        model = (models.from_run_metadata(metas[pick], f"{pick.removeprefix('run:')} run args")
                 if pick in metas else models.preset(pick))  # fmt: skip
    with c2:
        pick = host_select("Host", hosts, notes)
    if pick.hardware is None:  # a bad host file (one line), or none uploaded yet
        if pick.error:
            raise PlannerInputError(pick.error)
        st.stop()
    hw, host_name = pick.hardware, pick.stored
    kwargs: dict = {"model": model, "hardware": hw}
    c3, c4 = st.columns(2)
    with c3:
        comm_opts = {AUTO: "auto: this host's GPU comm runs, else published / spec sheet"}
        for row in comm_runs.to_dict("records"):
            comm_opts[row["run_id"]] = (f"{row['run_id']} ({row['host']}, {row['backend']}, "
                                        f"{row['device']}, {row['world_size']} ranks)")  # fmt: skip
        comm = url_select("Communication curves", "comm", list(comm_opts), comm_opts)
    if comm != AUTO:
        rows = qp.comm_rows(ui.store(), [comm]).to_dict("records")
        kwargs["comm_curves"] = curves_from_rows(rows, hw.interconnect, devices=())
    elif host_name is not None and not comm_runs.empty:
        ids = comm_runs[comm_runs["host"] == host_name]["run_id"].tolist()
        rows = qp.comm_rows(ui.store(), ids).to_dict("records") if ids else []
        kwargs["comm_curves"] = curves_from_rows(rows, hw.interconnect)
    with c4:
        cal_opts = {NONE: "none"}
        if host_name is not None:
            cal_opts[HOST] = f"{host_name}'s stored sweeps and profiled traces of this model"
        for row in traces.to_dict("records"):
            cal_opts[row["run_id"]] = (f"trace run {row['run_id']} ({row['host']}, step "
                                       f"{row['step_ms']:.2f} ms, world {row['world_size']})")  # fmt: skip
        cal = url_select("Calibrate to this host's measurements", "calib", list(cal_opts),
                         cal_opts, help="Fits only what the measurements identify, checks "
                         "itself on points it did not see, and is applied only where it beats "
                         "the fitted model there (docs/calibration.md). A trace gives the "
                         "collectives' transfer per call, never a TPOT.")  # fmt: skip
    routing = expert_routing(model)
    if routing is not None:
        kwargs["expert_load"] = routing
    if cal == HOST:
        points, steps = measurements.from_store(ui.store(), host_name, model_arg, model)
        kwargs.update(measured=points, traces=steps)
    elif cal != NONE:
        row = traces[traces["run_id"] == cal].iloc[0]
        world = hw.gpu_count if pd.isna(row["world_size"]) else int(row["world_size"])
        anatomy = qp.trace_allreduce_anatomy(ui.store(), cal)
        if anatomy is not None and anatomy.moe_calls_per_step > 0:
            notes.append(f"measured in {cal}: MoE AllReduce {anatomy.moe_calls_per_step:.0f} "
                         f"calls/step, {anatomy.moe_ms_per_step:.2f} ms "
                         f"({anatomy.moe_pct_of_step:.1f}% of step) - what expert parallelism "
                         f"would remove ({anatomy.calls_per_step:.0f} calls/step measured)")  # fmt: skip
        kwargs["traces"] = [measurements.trace_run(ui.store(), cal, world)]
    return kwargs, notes


st.title("Tradeoff calculator")
ui.share_link()
try:
    kwargs, notes = inputs()
    model, hw = kwargs["model"], kwargs["hardware"]
    all_layouts = default_layouts(model, hw)
    names = [x.name for x in all_layouts]
    c1, c2, c3, c4, c5 = st.columns([4, 1, 1, 1, 1])
    with c1:
        picked = st.multiselect("Layouts", names, default=names, key="layouts",
                                bind="query-params")  # fmt: skip
    with c2:
        cmin = ui.url_number("Concurrency from", "cmin", 1, 4096, 1, step=1)
    with c3:
        cmax = ui.url_number("to", "cmax", 1, 4096, 512, step=1)
    with c4:
        isl = ui.url_number("Input tokens", "isl", 1, 1_000_000, 1024, step=512,
                            help="1 = decode only")  # fmt: skip
    with c5:
        osl = ui.url_number("Output tokens", "osl", 2, 1_000_000, 1024, step=512)
    chosen = [x for x in all_layouts if x.name in picked]
    if not chosen:
        st.info("Pick at least one layout.")
        st.stop()
    if cmax < cmin:
        st.error(f"Concurrency range {cmin}-{cmax} is empty.")
        st.stop()
    res: PlanResult = plan(layouts=chosen, concurrencies=range(int(cmin), int(cmax) + 1),
                           isl=int(isl), osl=int(osl), **kwargs)  # fmt: skip
except PlannerInputError as exc:
    st.error(md(exc))
    st.stop()

render(res, notes)
