"""Open a dashboard page through Streamlit's own ``AppTest``: the page's script runs in this
process against a real store, with a link's query parameters, and no browser.

What only a browser shows (where things sit, a drawn chart, the URL a click writes, a script
tag that must not run) stays in tests/e2e; what a page decides (which runs, which message,
no exception, the run a link names kept) is checked here, many views a second.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from tests.helpers import ROOT

APP = ROOT / "app.py"
# A page rightly refusing a link's value says so in a warning; anything else is a problem.
LINK_COMPLAINT = re.compile(r"from the link|not in this (store|view)", re.I)


def app_page_files() -> dict[str, str]:
    """app.py's ``st.Page`` list as {url path: script path}: the default page at "", another
    at its ``url_path`` or, without one, the file's stem (Streamlit's rules)."""
    pages = {}
    for node in ast.walk(ast.parse(APP.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page":
            kw = {k.arg: k.value for k in node.keywords}
            script = ast.literal_eval(node.args[0])
            if "default" in kw and ast.literal_eval(kw["default"]):
                pages[""] = script
            elif "url_path" in kw:
                pages[ast.literal_eval(kw["url_path"])] = script
            else:
                pages[Path(script).stem] = script
    return pages


@contextmanager
def store_env(store: Path | str) -> Iterator[None]:
    """``STEPSCOPE_STORE`` set to ``store`` for the pages run in this process."""
    before = os.environ.get("STEPSCOPE_STORE")
    os.environ["STEPSCOPE_STORE"] = str(store)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("STEPSCOPE_STORE", None)
        else:
            os.environ["STEPSCOPE_STORE"] = before


@functools.cache
def _components():  # noqa: ANN202 - streamlit's BidiComponentManager
    """Streamlit's registry of installed v2 components, found once per process. A new AppTest
    scans the metadata of every installed package for them on its first run (1.7 s of each
    page view here: streamlit 1.67, testing/v1/app_test.py ``_run``, which reuses the
    AppTest's ``_bidi_component_manager`` when it has one); the packages do not change while
    the tests run, and the dashboard's server also scans once, at start."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


@contextmanager
def _through_app_py() -> Iterator[None]:
    """A run through app.py's ``st.navigation``, as the dashboard's server runs every page
    once its first run left Streamlit's legacy multipage mode (pages/helpers/ui.py).

    AppTest resets ``PagesManager.uses_pages_directory`` before each run (streamlit 1.67,
    testing/v1/app_test.py ``_run``), and the pages/ folder beside app.py turns it on again:
    the page file then runs alone, without app.py's sidebar and host filter. ui.py turns it
    off only when first imported, so only a process's first AppTest ran through app.py."""
    from streamlit.runtime.pages_manager import PagesManager

    init = PagesManager.__init__

    def navigation_mode(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        init(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    with mock.patch.object(PagesManager, "__init__", navigation_mode):
        yield


def new_app(timeout_s: float = 120):  # noqa: ANN201 - an AppTest
    """A fresh AppTest of app.py (a new browser tab's session), the components found once,
    each run through app.py (``_through_app_py``)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=timeout_s)
    if hasattr(at, "_bidi_component_manager"):  # another Streamlit: it scans, as it did
        at._bidi_component_manager = _components()
    run = at._run

    def run_through_app_py(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with _through_app_py():
            return run(*args, **kwargs)

    at._run = run_through_app_py
    return at


def open_page(script: str, params: dict[str, str | list[str]] | None = None,
              timeout_s: float = 120):  # noqa: ANN201 - an AppTest  # fmt: skip
    """A fresh session (as a link opened in a new tab) on ``script`` with ``params``; the
    store is the one ``STEPSCOPE_STORE`` names (``store_env``)."""
    at = new_app(timeout_s)
    at.switch_page(script)
    at.query_params.update(params or {})
    return at.run()


def unescaped(markdown: str) -> str:
    """The text a reader sees of markdown that escapes its names (``\\*`` shows ``*``)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def problems(at, expected_errors: re.Pattern | None = None) -> list[str]:  # noqa: ANN001
    """Exceptions, error boxes (but ``expected_errors``), a link value the page refused, and
    traceback text, as one line each (as the reader sees the text)."""
    found = [f"exception: {e.value}" for e in at.exception]
    errors = [unescaped(e.value) for e in at.error]
    found += [f"error: {e}" for e in errors
              if not (expected_errors and expected_errors.search(e))]  # fmt: skip
    warnings = [unescaped(w.value) for w in at.warning]
    found += [f"warning: {w}" for w in warnings if LINK_COMPLAINT.search(w)]
    text = "\n".join(m.value for m in [*at.markdown, *at.caption, *at.text])
    found += [f"text: {w}" for w in ("Traceback", "Exception:") if w in text]
    return found


def widget_labels(at) -> dict[str, str]:  # noqa: ANN001
    """Labels of the page's selectboxes and multiselects (main area and sidebar) -> kind."""
    return {**{w.label: "selectbox" for w in at.selectbox},
            **{w.label: "multiselect" for w in at.multiselect}}  # fmt: skip


def _values(block) -> Iterator[str]:  # noqa: ANN001 - an AppTest area or block
    """The texts of ``block`` and everything in it (element values and labels), in order."""
    for node in block:
        for attr in ("label", "value"):
            value = getattr(node, attr, None)
            if isinstance(value, str) and value:
                yield value


def page_text(at, area: str = "main") -> str:  # noqa: ANN001
    """Every text the page shows in ``area`` (``main`` or ``sidebar``): element values and
    labels (tabs, expanders, metrics, widgets), in page order, as the reader sees them; the
    contents of closed expanders and of every tab included (AppTest renders them all)."""
    return "\n".join(unescaped(v) for v in _values(getattr(at, area)))


def as_read(markdown: str) -> str:
    """The words a reader sees of markdown: bold and code marks dropped, escapes undone (as
    a browser's ``inner_text`` reads the rendered element)."""
    return unescaped(re.sub(r"(?<!\\)(\*\*|`)", "", markdown))


def read_text(at, tab: str | None = None) -> str:  # noqa: ANN001
    """The main area's texts (or only those of the tab labelled ``tab``) as ``as_read``
    gives them: what the same view's ``inner_text`` shows in a browser, tab by tab."""
    block = at.main if tab is None else next(t for t in at.tabs if t.label == tab)
    return "\n".join(as_read(v) for v in _values(block))


def open_clean(store: Path | str, script: str,
               params: dict[str, str | list[str]] | None = None):  # noqa: ANN201  # fmt: skip
    """``open_page`` on ``store``, failing on any problem the page shows (``problems``)."""
    with store_env(store):
        at = open_page(script, params)
    assert not problems(at), problems(at)
    return at


def words(store: Path | str, script: str,
          params: dict[str, str | list[str]] | None = None) -> str:  # fmt: skip
    """``read_text`` of ``script`` opened on ``store`` with ``params`` (``open_clean``)."""
    return read_text(open_clean(store, script, params))
