"""The Kernel page's floors: each step category against its physical floor (docs/floors.md).

The inputs the run did not record (model, host, batch, context) are chosen here, bound to the
URL (``fmodel``, ``fhost``, ``fbatch``, ``fcontext``); the floors are the planner's
(planner.api.stored_floors), the words and the chart this module's.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.helpers import ui
from pages.helpers.text import label, md, name, short
from planner.api import FloorReport, PlannerInputError, hardware, models, stored_floors
from store.errors import StoreError
from store.location import StoreLocation
from store.queries import planner as qp

RECORDED = "recorded"
FROM_TRACE = "trace"


def _offer(param: str, options: list[str]) -> None:
    """A link's value this store cannot offer falls back to the default (with a note)."""
    wanted = st.query_params.get(param)
    if wanted is not None and wanted not in options:
        st.caption(f"Floor input {param}='{name(wanted)}' from the link is not offered here.")
        st.query_params.pop(param, None)


def inputs(loc: StoreLocation) -> tuple[str | None, str | None, int | None, float | None]:
    """The model, host, batch and context pickers (defaults: what the run recorded). A bound
    selectbox keeps its option's text in the URL, so the options are the flags' own values."""
    model_opts = [RECORDED, *models.MODEL_PRESETS]
    host_opts = [FROM_TRACE, *hardware.HARDWARE_PRESETS, *hardware.known_gpu_names()]
    try:
        stored = qp.gpu_hosts(loc)
    except StoreError:
        stored = pd.DataFrame()
    host_opts += [str(h) for h in stored.get("host", []) if str(h) not in host_opts]
    _offer("fmodel", model_opts)
    _offer("fhost", host_opts)
    c1, c2, c3, c4 = st.columns(4)
    model = c1.selectbox("Model (floors)", model_opts, key="fmodel", bind="query-params",
                         help=f"`{RECORDED}`: the model the run recorded; else a preset "
                         "(`--model` of `python -m collectors floor`)")  # fmt: skip
    host = c2.selectbox("Host (floors)", host_opts, key="fhost", bind="query-params",
                        format_func=short,
                        help=f"`{FROM_TRACE}`: the GPU the trace names, else its host's `gpu` "
                        "run; else a preset, a GPU's spec sheet or a stored host "
                        "(`--host`)")  # fmt: skip
    batch = ui.url_number("Batch (decode sequences)", "fbatch", 1, 1_000_000, None,
                          container=c3, step=1, help="where the steps do not say (`--batch`)")
    context = ui.url_number("Context (KV tokens per sequence)", "fcontext", 0.0, 1e8, None,
                            container=c4, help="where the steps do not say (`--context`)")  # fmt: skip
    return (None if model in (None, RECORDED) else model,
            None if host in (None, FROM_TRACE) else host,
            int(batch) if batch is not None else None,
            float(context) if context is not None else None)  # fmt: skip


COLUMNS = ["category", "measured_us_per_step", "floor_us_per_step", "measured_over_floor",
           "at_most_to_win_us", "input_error", "assumption"]  # fmt: skip


def frame(report) -> pd.DataFrame:
    """The busiest rank's categories: measured, floor, measured / floor, at most to win; a
    floor above its measurement is an input error instead (no ratio, nothing to win)."""
    top = report.busiest if report is not None else None
    rows = [{"category": c.category, "measured_us_per_step": c.measured_us,
             "floor_us_per_step": c.floor_us, "measured_over_floor": c.ratio,
             "at_most_to_win_us": c.win_us, "input_error": c.input_error,
             "assumption": c.assumption}
            for c in (top.categories if top else ())]  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def chart(data: pd.DataFrame, who: str, colors: dict[str, str]) -> go.Figure:
    """One bar pair per category: measured, and its floor beside it."""
    fig = go.Figure()
    fig.add_bar(x=data["category"], y=data["measured_us_per_step"], name="measured",
                marker_color=[colors.get(c, "#4C78A8") for c in data["category"]])  # fmt: skip
    # an input error's "floor" is no floor: no bar for it (the error says which input)
    floors = data["floor_us_per_step"].where(data["input_error"].fillna("") == "")
    fig.add_bar(x=data["category"], y=floors, name="floor",
                marker_color="#BBBBBB", customdata=data["assumption"].map(label),
                hovertemplate="%{x} floor: %{y:.1f} us<br>%{customdata}<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="group", title=f"Measured vs physical floor per step ({who})",
                      yaxis_title="us / step", height=400, margin={"t": 50, "b": 40},
                      legend={"orientation": "h"})  # fmt: skip
    return fig


def step_sentence(report) -> str:
    top = report.busiest
    if top is None or top.step_floor_us is None:
        return ""
    m, f = top.step_measured_us, top.step_floor_us
    text = (f"Step: **{m / 1e3:.2f} ms** measured vs **{f / 1e3:.2f} ms** sum of floors: at most "
            f"**{max(m - f, 0) / 1e3:.2f} ms** to win ({m / f:.1f}x the floors).") if f else ""  # fmt: skip
    if report.input_errors():
        text += " The sum leaves out the categories with an input error (below)."
    best = max((c for c in top.categories if c.win_us is not None and not c.input_error),
               key=lambda c: c.win_us, default=None)  # fmt: skip
    if best is not None and best.ratio:
        text += (f" Most to win: **{best.category}**, at most {best.win_us / 1e3:.2f} ms "
                 f"({best.ratio:.1f}x its floor).")  # fmt: skip
    return text


@st.cache_data(max_entries=32, show_spinner=False)
def report_for(version: str, run_id: str, model: str | None, host: str | None,
               batch: int | None, context: float | None) -> FloorReport:  # fmt: skip
    """The planner's floors of a stored run for these inputs, kept per store version (the
    key; the server's store): every rerun of the Kernel page redid them, the host's comm
    curves from its ~1,200 stored rows included (0.15 s of a 0.5 s warm render, 10,000 runs)."""
    return stored_floors(run_id, None, model, host, batch, context)


def show(loc: StoreLocation, run_id: str, colors: dict[str, str]) -> pd.DataFrame:
    """The chart, the step against its floors, what is missing, and the inputs' pickers;
    returns the floors per category (empty when there are none)."""
    slot = st.container()
    with st.expander("Floor inputs: model, host, batch, context"):
        model, host, batch, context = inputs(loc)
    with slot:
        try:
            report = report_for(ui.version(loc), run_id, model, host, batch, context)
        except PlannerInputError as exc:
            st.error(f"Floors: {md(exc)}")
            return frame(None)
        data = frame(report)
        top = report.busiest
        if data.empty or top is None:
            st.caption("No steps with categorised time: nothing to floor.")
            return data
        who = f"rank {top.rank}" + (f", the busiest of {len(report.ranks)}"
                                    if len(report.ranks) > 1 else "")  # fmt: skip
        if top.step_floor_us is not None:
            ui.chart(chart(data, who, colors), data, "floors")
            st.markdown(step_sentence(report))
        if report.input_errors():
            st.error("Input errors: a floor above its measured time is no result, so these "
                     "categories get no ratio and nothing to win; fix the input it names:\n"
                     + "\n".join(f"- {md(e)}" for e in report.input_errors()))  # fmt: skip
        if report.missing:
            st.warning("Missing floor inputs (floors take the least they allow):\n"
                       + "\n".join(f"- {md(m)}" for m in report.missing))  # fmt: skip
        used = "; ".join(f"{k}: {v}" for k, v in report.described.items())
        if used:
            st.caption(f"Floor inputs: {md(used)}.")
    return data
