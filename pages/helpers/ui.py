"""UI helpers every page shares: store location, sidebar, empty states, exports.

No SQL here either: data comes from store.queries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from pages.helpers.text import name, number_in, short
from store.errors import StoreError, StoreMissing
from store.location import StoreLocation, resolve
from store.queries import overview as queries

ALL = "(all hosts)"
FEW = 5  # a list of runs, kernels or hosts longer than this is a count and a table

def _leave_legacy_multipage_mode() -> None:
    """Make a shared deep link work on a freshly started server.

    Streamlit treats a ``pages/`` folder beside app.py as its legacy multipage mode until
    ``st.navigation`` has run once in the server process; until then a link such as
    ``/hardware?run=...`` runs the page file alone, skipping app.py (no sidebar, wrong
    page list). Every page imports this module first, so switch the server to
    ``st.navigation`` mode and rerun the same URL through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


_leave_legacy_multipage_mode()



@dataclass(frozen=True)
class Area:
    """A part of the product a collector fills, and the exact command that fills it."""

    verb: str
    title: str
    command: str


# What the Overview lists as empty areas; each collector issue adds its own line.
AREAS: tuple[Area, ...] = (
    Area("host", "Environment snapshot", "python -m collectors host"),
    Area("gpu", "GPU inventory", "python -m collectors gpu"),
    Area("trace", "Trace import", "python -m collectors trace /path/to/traces/"),
    Area("profile", "Kernel breakdown (built-in MoE decode profile)", "python -m collectors profile"),
    Area("comm", "Collective benchmark", "python -m collectors comm --tokens 1,2,4,8,16,32 "
         "--hidden 7168 --dtype bf16"),  # fmt: skip
    Area("nccl-tests", "nccl-tests import", "python -m collectors nccl-tests all_reduce_perf.log"),
    Area("vllm-bench", "Serving benchmark", "python -m collectors vllm-bench --results "
         "RESULTS_DIR --server-args \"vllm serve MODEL -tp 8\""),  # fmt: skip
    Area("vllm-metrics", "vLLM metrics scrape", "python -m collectors vllm-metrics --url "
         "http://127.0.0.1:8000"),  # fmt: skip
    Area("vllm-profile", "vLLM profile under load", "python -m collectors vllm-profile --url "
         "http://127.0.0.1:8000 --trace-dir TORCH_PROFILER_DIR"),  # fmt: skip
    Area("expert-load", "Expert load (SGLang expert distribution recorder)", "python -m "
         "collectors expert-load expert_distribution_recorder_*.pt --model deepseek-v3"),  # fmt: skip
)


def few(items: list[str], more: str = "more") -> str:
    """The first FEW items joined, then how many more: "a, b, c, d, e and 12 more" (the page
    shows the whole list in a table beside it)."""
    head = ", ".join(str(i) for i in items[:FEW])
    return head + (f" and {len(items) - FEW:,} {more}" if len(items) > FEW else "")


def store() -> StoreLocation:
    """The server's store, its data version asked once for this call's queries (a lake's is
    a catalog round trip; store.reader.pinned): a commit shows on the next rerun."""
    from store.reader import pinned

    return pinned(resolve(None))


def version(loc: StoreLocation) -> str:
    """The store's data version (the one ``store()`` pinned for this run, else asked now):
    the key a page's own cache of computed results changes with."""
    from store.reader import data_version

    return loc.pinned_version or data_version(loc)


def sidebar() -> None:
    """Store in use and the host filter, bound to the URL as ``?host=``."""
    loc = store()
    with st.sidebar:
        st.caption(f"Store: `{loc.describe()}`")
        try:
            names = queries.host_names(loc)
        except StoreError:
            names = []
        selected = st.query_params.get("host")
        options = [ALL, *names]
        if selected and selected not in options:
            options.append(selected)  # a link to a host this store lacks still shows it
        st.selectbox("Host", options, key="host", bind="query-params", format_func=short)


def host_filter() -> str | None:
    value = st.session_state.get("host")
    return None if value in (None, ALL) else value


def store_problem(exc: Exception) -> None:
    """One plain line for a store that cannot be read, plus the command that fixes it."""
    if isinstance(exc, StoreMissing):
        st.info("No runs yet. Gather this machine's environment first:")
        st.code("python -m collectors host", language="bash")
    else:
        st.error(str(exc))


def empty_state(area: Area, what: str | None = None) -> None:
    st.info(what or f"No {area.title.lower()} runs yet. This command fills it:")
    st.code(area.command, language="bash")


def age(ts: object, now: datetime | None = None) -> str:
    """Human age of a timestamp: '42 s', '5 min', '3 h', '2 d'."""
    if ts is None or pd.isna(ts):
        return "never"
    now = now or datetime.now(UTC)
    seconds = (now - pd.Timestamp(ts).to_pydatetime()).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"


def blank(frame: pd.DataFrame) -> pd.DataFrame:
    """A table for display whose missing cells are empty: the data grid draws a NULL as a
    grey "None" (and NaN as "None" too), which reads as a value. A column holding nulls
    becomes text (whole numbers without a fraction, times to the second); the others keep
    their types, so they still sort as numbers."""
    out = frame.copy()
    for col in out.columns:
        values = out[col]
        missing = values.isna()
        if not missing.any():
            continue
        if pd.api.types.is_datetime64_any_dtype(values):
            text = values.dt.strftime("%Y-%m-%d %H:%M:%S")
        elif pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            text = values.map(lambda v: f"{v:.0f}" if float(v).is_integer() else f"{v:g}",
                              na_action="ignore")  # fmt: skip
        else:
            text = values.map(str, na_action="ignore")
        out[col] = text.astype(object).where(~missing, "")
    return out


def csv_download(frame: pd.DataFrame | Callable[[], pd.DataFrame], name: str,
                 label: str = "CSV") -> None:  # fmt: skip
    """A CSV of ``frame``, or of what ``frame()`` builds (a frame only the file needs)."""
    # Built on click (a callable runs only then), not on every rerun of the page.
    st.download_button(
        label, lambda: (frame() if callable(frame) else frame).to_csv(index=False).encode(),
        file_name=f"{name}.csv",
        mime="text/csv", key=f"csv-{name}", icon=":material/download:", on_click="ignore",
    )  # fmt: skip


def html_download(fig: object, name: str, label: str = "HTML") -> None:
    """A self-contained HTML file of a Plotly figure (opens offline)."""
    # ~4.7 MB with plotly.js inlined: build it only when the user clicks.
    st.download_button(
        label, lambda: fig.to_html(include_plotlyjs=True, full_html=True).encode(),  # type: ignore[attr-defined]
        file_name=f"{name}.html", mime="text/html", key=f"html-{name}",
        icon=":material/download:", on_click="ignore",  # a download needs no rerun
    )  # fmt: skip


def share_link() -> str:
    """Show the link that reopens exactly this view (with a copy button); return it.

    Built from the page URL and the live query params, which bound widgets keep in sync.
    """
    from urllib.parse import urlencode, urlsplit, urlunsplit

    base = urlsplit(st.context.url or "")
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    link = urlunsplit((base.scheme, base.netloc, base.path, urlencode(params, doseq=True), ""))
    with st.popover("Copy link", icon=":material/link:"):
        st.caption("This link reopens this view, with the same runs and filters:")
        st.code(link, language=None)
    return link


def chart(fig: object, data: pd.DataFrame, name: str) -> None:
    """A Plotly chart with its two exports under it: CSV of its data, self-contained HTML."""
    st.plotly_chart(fig, width="stretch")
    c1, c2, _ = st.columns([1, 1, 6])
    with c1:
        csv_download(data, name)
    with c2:
        html_download(fig, name)


def url_number(label: str, key: str, low: float, high: float, default: float | None, *,
               container: object = None, step: float | None = None,
               help: str | None = None) -> float | None:  # noqa: A002 - Streamlit's name
    """A number input kept in ``?key=`` (not when it holds ``default``). A link's value that
    is no number within [low, high] (``inf``, ``nan``, ``1e400``, text) is ignored with the
    page's usual note. Not ``bind="query-params"``: Streamlit parses a bound number before
    the page can look at it, and ``inf`` in an integer input then stops the page."""
    box = container or st
    whole = all(isinstance(x, int) for x in (low, high, step or 1))
    if key not in st.session_state:
        raw = st.query_params.get(key)
        value = number_in(raw, low, high) if raw is not None else None
        if value is not None and whole and value != int(value):
            value = None
        if raw is not None and value is None:
            box.caption(f"{label} '{name(raw, 24)}' from the link is not available here "
                        f"({low:g} to {high:g}); showing "
                        f"{'none' if default is None else f'{default:g}'}.")  # fmt: skip
        seeded = default if value is None else (int(value) if whole else value)
        if seeded is not None:
            st.session_state[key] = seeded
    extra = {"value": None} if default is None else {}
    got = box.number_input(label, min_value=low, max_value=high, step=step, key=key,  # type: ignore[attr-defined]
                           help=help, **extra)  # fmt: skip
    if got is None or got == default:
        st.query_params.pop(key, None)
    elif st.query_params.get(key) != str(got):
        st.query_params[key] = str(got)
    return got
