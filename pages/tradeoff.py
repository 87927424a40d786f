"""Tradeoff calculator: which layout serves the most per GPU within latency targets, at full
precision, and why.

The first screen answers: the setup (model, host, engine, lengths, TPOT / TTFT targets), one
sentence with metric cards (the best layout, its tokens/s per GPU, concurrency, TPOT and
TTFT, against the runner-up) and the Pareto chart; the rest sits in tabs below
(pages/helpers/tradeoff_view.py). State lives in the URL: ``setup`` (the published
reference case or a model + host), ``model`` (a preset or ``run:<run id>`` whose arguments
record the model), ``hw`` (pages/helpers/host_choice.py), ``engine``, ``isl``/``osl`` (the
benchmark's input / output lengths: every layout is predicted for ``vllm bench serve`` at
them), ``tpot``/``ttft`` (the targets, ms) and ``stat`` (``mean``, ``p90``, ``p99``), and
under "More inputs" ``layouts``, ``cmin``/``cmax``, ``comm`` (an absolute comm run id),
``calib`` (``host``: the stored host's runs of the model; or an absolute trace run id) and
``experts`` (``uniform`` routing or an absolute expert-load run id); ``view`` and ``at`` in
the tabs. Numbers come from planner.plan and planner.meet_targets (the one serving model,
each prediction with its measured-error band); this page only formats them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from pages.helpers import ui
from pages.helpers.host_choice import host_select
from pages.helpers.text import short
from pages.helpers.tradeoff_answer import plain
from pages.helpers.tradeoff_view import render
from planner.api import (
    ENGINES,
    SLO_STATS,
    ExpertLoad,
    PlannerInputError,
    PlanResult,
    Targets,
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
from store.queries import serving as qs
from store.queries import trace as qt

REF = reference.NAME
CUSTOM = "custom"
AUTO = "auto"
NONE = "none"
UNIFORM = "uniform"
HOST = "host"


def url_select(title: str, param: str, options: list[str], labels: dict[str, str],
               problems: list[str], help: str | None = None) -> str:  # fmt: skip
    """A selectbox whose URL parameter always holds the chosen (absolute) value; a value from
    the link that is not on offer goes to ``problems`` (shown above the answer, even when the
    selectbox sits in a closed expander)."""
    key = f"pick_{param}"
    wanted = st.query_params.get(param)
    if wanted and wanted not in options:
        # shortened only: every problem is escaped once, by plain(), where it is shown
        problems.append(f"{title} '{short(wanted)}' from the link is not available here; "
                        "showing another.")  # fmt: skip
        wanted = None
    if st.session_state.get(key) not in options:
        st.session_state[key] = wanted or options[0]
    choice = st.selectbox(title, options, key=key, help=help,
                          format_func=lambda v: labels.get(v, v))  # fmt: skip
    st.query_params[param] = choice
    return choice


def store_frames() -> tuple[pd.DataFrame, ...]:
    """Stored GPU hosts, comm runs, trace runs and recorded models (empty without a
    store), and a note saying why."""
    loc = ui.store()
    try:
        # the trace runs to calibrate on, listed without their breakdowns (every run's is a
        # scan of all step categories: ~1 s at 10,000 runs); the chosen one's is read alone
        frames = (qp.gpu_hosts(loc), qp.comm_runs(loc), qt.trace_runs(loc), qp.run_models(loc))
        return (*frames, "")
    except StoreError as exc:
        empty = pd.DataFrame()
        return empty, empty, empty, empty, f"store not readable ({exc}): presets only"


def run_labels(frame: pd.DataFrame, form: str, columns: list[str]) -> dict[str, str]:
    """run id -> ``form`` filled with the row's ``columns`` (column by column: thousands of
    runs at fleet scale, and DataFrame.to_dict is slow on arrow-backed strings)."""
    if frame.empty:
        return {}
    values = [frame[c].tolist() for c in columns]
    return {row[0]: form.format(*row) for row in zip(*values, strict=True)}


def model_options(recorded: pd.DataFrame) -> tuple[dict[str, str], dict[str, object]]:
    """Presets, then models recorded in runs (``run:<id>``) that the planner can read."""
    labels = {n: f"{n} (preset)" for n in models.MODEL_PRESETS}
    metas: dict[str, object] = {}
    if recorded.empty:
        return labels, metas
    for run_id, verb, text in zip(recorded["run_id"].tolist(), recorded["verb"].tolist(),
                                  recorded["model"].tolist(), strict=True):  # fmt: skip
        try:
            meta = json.loads(text)
        except (TypeError, ValueError):
            continue
        if isinstance(meta, str) and models.preset_for_name(meta) is None:
            continue
        name = meta if isinstance(meta, str) else meta.get("name", "model")
        key = f"run:{run_id}"
        labels[key] = f"{name} as recorded by {verb} run {run_id}"
        metas[key] = meta
    return labels, metas


def expert_routing(model, problems: list[str]) -> ExpertLoad | None:
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
    pick = url_select("Expert routing", "experts", list(opts), opts, problems,
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


@dataclass
class Setup:
    """What the first row chose: plan() keyword arguments, notes on where each input came
    from, the model as the store names it and the store's host (None: preset, file, or the
    reference case), whose measured runs are points on the Pareto chart."""

    kwargs: dict
    notes: list[str]
    model_arg: str
    host_name: str | None = None
    frames: tuple[pd.DataFrame, ...] = ()  # the store's comm runs and trace breakdowns
    view_slot: Any = None  # the row's last column: the model / calibrated switch, if any


def choose_setup(problems: list[str]) -> Setup:
    """Setup, model and host: the first row (its last column left for the view switch)."""
    setups = {REF: "Reference case: Kimi-K2.5 on 8x RTX PRO 6000 (published figures)",
              CUSTOM: "Choose a model and a host"}  # fmt: skip
    c1, c2, c3, c4 = st.columns([3, 3, 3, 2])
    with c1:
        setup = url_select("Setup", "setup", list(setups), setups, problems)
    hosts, comm_runs, traces, recorded, problem = store_frames()
    notes = [problem] if problem else []
    if setup == REF:
        hw = hardware.preset(reference.HOST)
        with c2:
            st.caption(f"{reference.MODEL} on {hw.gpu_count}x {hw.gpu_model}: the write-up's "
                       "published figures (REFERENCE §1), never mixed with measured runs.")  # fmt: skip
        return Setup({"model": models.preset(reference.MODEL), "hardware": hw,
                      **reference.plan_kwargs()}, notes, reference.MODEL, view_slot=c4.empty())  # fmt: skip
    with c2:
        labels, metas = model_options(recorded)
        pick = url_select("Model", "model", list(labels), labels, problems)
        model = (models.from_run_metadata(metas[pick], f"{pick.removeprefix('run:')} run args")
                 if pick in metas else models.preset(pick))  # fmt: skip
    with c3:
        host = host_select("Host", hosts, notes)
    if host.hardware is None:  # a bad host file (one line), or none uploaded yet
        if host.error:
            raise PlannerInputError(host.error)
        st.stop()
    return Setup({"model": model, "hardware": host.hardware}, notes, pick, host.stored,
                 (comm_runs, traces), c4.empty())  # fmt: skip


def workload_row() -> tuple[dict, Targets]:
    """Engine, lengths and the latency targets: the second row (all in the link)."""
    c = st.columns(6)
    engine = c[0].selectbox("Engine", list(ENGINES), key="engine", bind="query-params",
                            help="the engine every layout is predicted on (SGLang-only "
                            "layouts on SGLang)")  # fmt: skip
    isl = ui.url_number("Input tokens", "isl", 1, 1_000_000, 1024, container=c[1], step=512,
                        help="1 = decode only")  # fmt: skip
    osl = ui.url_number("Output tokens", "osl", 2, 1_000_000, 1024, container=c[2], step=512)
    tpot = ui.url_number("TPOT target (ms)", "tpot", 0.1, 100_000.0, 50.0, container=c[3],
                         step=5.0, help="time per output token, at most: 1000 / TPOT tokens/s "
                         "per user")  # fmt: skip
    ttft = ui.url_number("TTFT target (ms)", "ttft", 1.0, 10_000_000.0, 2000.0, container=c[4],
                         step=100.0, help="time to first token, at most")  # fmt: skip
    stat = c[5].selectbox("Targets hold on", list(SLO_STATS), key="stat", bind="query-params",
                          help="the mean, or the per-request p90 / p99 where the predictions "
                          "carry them (else the mean stands in, and the answer says so)")  # fmt: skip
    return ({"engine": engine, "isl": int(isl), "osl": int(osl)},
            Targets(float(tpot), float(ttft), stat))  # fmt: skip


def layout_inputs(model, hw) -> tuple[list, int, int]:
    """Which layouts, over which concurrency grid."""
    all_layouts = default_layouts(model, hw)
    names = [x.name for x in all_layouts]
    c1, c2, c3 = st.columns([4, 1, 1])
    picked = c1.multiselect("Layouts", names, default=names, key="layouts", bind="query-params")
    cmin = ui.url_number("Concurrency from", "cmin", 1, 4096, 1, container=c2, step=1)
    cmax = ui.url_number("to", "cmax", 1, 4096, 512, container=c3, step=1)
    return [x for x in all_layouts if x.name in picked], int(cmin), int(cmax)


def measurement_inputs(s: Setup, problems: list[str]) -> None:
    """Communication curves, calibration and expert routing of a chosen model and host:
    into ``s.kwargs`` (and ``s.notes``)."""
    comm_runs, traces = s.frames
    kwargs, hw, host_name, model = s.kwargs, s.kwargs["hardware"], s.host_name, s.kwargs["model"]
    c3, c4 = st.columns(2)
    with c3:
        comm_opts = {AUTO: "auto: this host's GPU comm runs, else published / spec sheet"}
        comm_opts |= run_labels(comm_runs, "{} ({}, {}, {}, {} ranks)",
                            ["run_id", "host", "backend", "device", "world_size"])  # fmt: skip
        comm = url_select("Communication curves", "comm", list(comm_opts), comm_opts, problems)
    if comm != AUTO:
        rows = qp.comm_rows(ui.store(), [comm]).to_dict("records")
        kwargs["comm_curves"] = curves_from_rows(rows, hw.interconnect, devices=(), chosen=True)
    elif host_name is not None and not comm_runs.empty:
        ids = comm_runs[comm_runs["host"] == host_name]["run_id"].tolist()
        rows = qp.comm_rows(ui.store(), ids).to_dict("records") if ids else []
        kwargs["comm_curves"] = curves_from_rows(rows, hw.interconnect)
    with c4:
        cal_opts = {NONE: "none"}
        if host_name is not None:
            cal_opts[HOST] = f"{host_name}'s stored sweeps and profiled traces of this model"
        cal_opts |= run_labels(traces, "trace run {} ({}, {}, world {})",
                           ["run_id", "host", "verb", "world_size"])  # fmt: skip
        cal = url_select("Calibrate to this host's measurements", "calib", list(cal_opts),
                         cal_opts, problems, help="Fits only what the measurements identify, "
                         "checks itself on points it did not see, and is applied only where "
                         "it beats the fitted model there (docs/calibration.md). A trace gives "
                         "the collectives' transfer per call, never a TPOT.")  # fmt: skip
    routing = expert_routing(model, problems)
    if routing is not None:
        kwargs["expert_load"] = routing
    if cal == HOST:
        skipped: list[str] = []
        points, steps = measurements.from_store(ui.store(), host_name, s.model_arg, model, hw,
                                                skipped)  # fmt: skip
        kwargs.update(measured=points, traces=steps)
        s.notes += skipped
    elif cal != NONE:
        row = traces[traces["run_id"] == cal].iloc[0]
        world = hw.gpu_count if pd.isna(row["world_size"]) else int(row["world_size"])
        anatomy = qp.trace_allreduce_anatomy(ui.store(), cal)
        if anatomy is not None and anatomy.moe_calls_per_step > 0:
            s.notes.append(f"measured in {cal}: MoE AllReduce {anatomy.moe_calls_per_step:.0f} "
                           f"calls/step, {anatomy.moe_ms_per_step:.2f} ms "
                           f"({anatomy.moe_pct_of_step:.1f}% of step) - what expert parallelism "
                           f"would remove ({anatomy.calls_per_step:.0f} calls/step measured)")  # fmt: skip
        kwargs["traces"] = [measurements.trace_run(ui.store(), cal, world)]


def measured_runs(s: Setup) -> pd.DataFrame:
    """The store's serving benchmark rows of this model on this stored host (empty for
    presets, files and the reference case): points on the Pareto chart."""
    if s.host_name is None:
        return pd.DataFrame()
    loc, model = ui.store(), s.kwargs["model"]
    try:
        mine = [m for m in qs.bench_models(loc, s.host_name)
                if measurements.model_matches(m, s.model_arg, model)]  # fmt: skip
        frames = [qs.bench_results(loc, qs.bench_runs(loc, s.host_name, m)["run_id"].tolist(), m)
                  for m in mine]  # fmt: skip
    except StoreError:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@st.cache_data(max_entries=16, show_spinner="Simulating each layout's scheduler ...")
def planned(**kwargs: Any) -> PlanResult:
    """plan() once per set of inputs in this server: a target, the statistic, a tab or a view
    changes nothing plan() computes, and a shared link opens on the result its sender saw
    (each layout's scheduler simulation costs seconds)."""
    return plan(**kwargs)


MORE = "More inputs: layouts, concurrency range, communication curves, calibration, routing"

title, link = st.columns([4, 1], vertical_alignment="bottom")
title.title("Tradeoff calculator")
with link:
    ui.share_link()
problems: list[str] = []
answer_area = st  # until the answer's place exists, messages go where the page is
try:
    setup = choose_setup(problems)
    workload, targets = workload_row()
    answer_area = st.container()  # the answer goes here, above the inputs fewer people need
    with st.expander(MORE):
        chosen, cmin, cmax = layout_inputs(setup.kwargs["model"], setup.kwargs["hardware"])
        if setup.frames:
            measurement_inputs(setup, problems)
    for line in problems:
        answer_area.warning(plain(line))
    if not chosen:
        answer_area.info("Pick at least one layout (under “More inputs”).")
        st.stop()
    if cmax < cmin:
        answer_area.error(f"Concurrency range {cmin}-{cmax} is empty.")
        st.stop()
    res: PlanResult = planned(layouts=chosen, concurrencies=list(range(cmin, cmax + 1)),
                              **workload, **setup.kwargs)  # fmt: skip
    measured = measured_runs(setup)
    targets.check()
except PlannerInputError as exc:
    answer_area.error(plain(str(exc)))
    st.stop()

render(res, setup.notes, targets, measured, setup.host_name, answer_area, setup.view_slot)
