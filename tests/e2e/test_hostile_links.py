"""Every page facing hostile query-string values and hostile stored names: no exception,
no script, no markup, store intact.

Every SQL value a page sends is a bound parameter and every URL value is treated as data;
this feeds SQL-injection, markup, path and size attacks into each parameter each page
keeps in its URL (and into parameters it does not know). The store also holds a host, a
label, a served model, a kernel and a GPU named ``**bold** $x$ :red[red] [click](...)`` and
a 100 KB host name (tests/e2e/hostile_store.py, issue 60): every page shows them as text.
What a page renders as Markdown is read through Streamlit's ``AppTest`` (fast, every page);
what only a browser shows (no bold, no LaTeX, no link drawn) in Chromium.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from tests.comm.nccl_samples import V2_18
from tests.e2e import hostile_store as hs
from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard
from tests.gpu.conftest import PCIE, fake_env
from tests.helpers import FIXTURES, query, run_cli

pytestmark = pytest.mark.e2e

HOSTILE = [
    "'; DROP TABLE runs; --",
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>',
    "../../../../etc/passwd%00",
    "9" * 300,
]


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("hostile")
    store = tmp / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0
    assert run_cli(store, "gpu", **fake_env(PCIE)).code == 0
    log = tmp / "nccl.log"
    log.write_text(V2_18)
    assert run_cli(store, "nccl-tests", str(log)).code == 0
    traces = FIXTURES / "traces" / "hta"
    if traces.is_dir():
        assert run_cli(store, "trace", str(traces / "sampled_rank-0.json.gz"),
                       str(traces / "sampled_rank-1.json.gz")).code == 0  # fmt: skip
    hs.fill(store, tmp)
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d
    stop_dashboard(d)


def _table_counts(store: Path) -> dict[str, int]:
    tables = [r[0] for r in query(store, "SELECT table_name FROM information_schema.tables "
                                         "WHERE table_type = 'BASE TABLE'")]  # fmt: skip
    return {t: query(store, f'SELECT count(*) FROM "{t}"')[0][0] for t in tables}


def _page_paths(page, dash: Dashboard) -> list[str]:
    open_app(page, dash.url)
    links = page.locator("[data-testid='stSidebarNavLink']")
    paths = [urlsplit(links.nth(i).get_attribute("href")).path for i in range(links.count())]
    assert len(paths) >= 2, "navigation lists the pages"
    return paths


SCRIPT = HOSTILE[1]  # the value that would run script if a page drew it as HTML


def test_hostile_query_values_on_every_page(dash: Dashboard) -> None:
    """Every page with each hostile value in every parameter it keeps in its link (plus
    shared and unknown ones), all at once (each must be handled on its own), through AppTest:
    no exception, and the store unchanged. Whether a value can run script is the browser's
    (test_hostile_values_run_no_script_in_chromium)."""
    from tests.pages.apptest import app_page_files, open_page, store_env

    before = _table_counts(dash.store)
    with store_env(dash.store):
        for script in app_page_files().values():
            kept = open_page(script).query_params
            names = set(kept) | {"host", "run", "zzz"}
            for value in HOSTILE:
                at = open_page(script, dict.fromkeys(sorted(names), value))
                assert not at.exception, (script, value, at.exception[0].value)
    assert _table_counts(dash.store) == before


def test_hostile_values_run_no_script_in_chromium(dash: Dashboard, page) -> None:
    """What only a browser shows: the script-carrying value in every parameter of every
    page's link (its navigation's pages) draws no element that runs it."""
    from tests.pages.apptest import app_page_files, open_page, store_env

    before = _table_counts(dash.store)
    scripts = app_page_files()
    for path in _page_paths(page, dash):
        # Parameters the page keeps in its URL for its default view (AppTest's view of the
        # same page), plus shared and unknown ones.
        with store_env(dash.store):
            kept = open_page(scripts[path.strip("/")]).query_params
        names = set(kept) | {"host", "run", "zzz"}
        open_app(page, dash.link(path) + "?" + urlencode(dict.fromkeys(sorted(names), SCRIPT)))
        assert page.evaluate("() => window.__pwned === undefined"), path
        expect(page.locator("[data-testid='stApp']")).to_be_visible()
    assert _table_counts(dash.store) == before


PAGES = ("overview", "kernels", "hardware", "collectives", "experts", "tradeoff", "policy",
         "serving", "trends")  # fmt: skip
# Every element Streamlit renders as Markdown, as AppTest lists them
MARKDOWN_KINDS = ("markdown", "caption", "info", "warning", "error", "success", "subheader",
                  "title", "header")  # fmt: skip
NUMBERS = {"overview": ("stale_h",), "collectives": ("hidden",), "trends": ("min_change",),
           "tradeoff": ("cmin", "cmax", "isl", "osl", "tpot", "ttft"),
           "kernels": ("fbatch", "fcontext")}  # fmt: skip


def _app(dash: Dashboard, page: str, params: dict[str, str]):  # noqa: ANN202 - an AppTest
    import os

    from tests.pages.apptest import new_app

    os.environ["STEPSCOPE_STORE"] = str(dash.store)
    at = new_app(120)
    at.switch_page(f"pages/{page}.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, (page, params, at.exception[0].value)
    return at


def _rendered_markup(at) -> list[str]:  # noqa: ANN001
    bodies = [str(e.value) for kind in MARKDOWN_KINDS for e in getattr(at, kind)]
    bodies += [str(e.label) for e in [*at.metric, *at.expander]]
    bodies += [str(v) for t in at.table for v in t.value.astype(str).to_numpy().ravel()]  # Markdown cells
    return [b for b in bodies if any(m in b for m in hs.MARKERS)]


def _gpu_run(store: Path, host: str) -> str:
    return query(store, "SELECT run_id FROM runs WHERE verb = 'gpu' AND host = ?", [host])[0][0]


@pytest.mark.parametrize("page", PAGES)
def test_stored_names_are_text_in_every_sentence(dash: Dashboard, page: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Every page, opened plain, on the hostile host, and (where it takes one) on its `gpu`
    run: no Markdown element holds a hostile name unescaped."""
    monkeypatch.setenv("STEPSCOPE_STORE", str(dash.store))
    views = [{}, {"host": hs.NAME}, {"host": hs.LONG_HOST}]
    if page in ("tradeoff", "serving"):
        views.append({"hw": f"gpu:{_gpu_run(dash.store, hs.NAME)}"})
    for params in views:
        at = _app(dash, page, params)
        assert _rendered_markup(at) == [], (page, list(params))
        assert not any(hs.LONG_HOST in str(e.value) for k in MARKDOWN_KINDS
                       for e in getattr(at, k)), "a 100 KB name is shortened on screen"  # fmt: skip


@pytest.mark.parametrize("page", sorted(NUMBERS))
def test_numbers_from_a_link_outside_their_range_are_ignored_and_said(
        dash: Dashboard, page: str, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Each bad value in every number the page keeps in its link, all of them in one link
    (each is read on its own): each is said once, by its own label, and leaves the link."""
    monkeypatch.setenv("STEPSCOPE_STORE", str(dash.store))
    for value in ("inf", "-inf", "nan", "1e400", "9" * 40, "fast"):
        at = _app(dash, page, dict.fromkeys(NUMBERS[page], value))  # fails on any exception
        shown = {w.key: w.label for w in at.number_input if w.key in NUMBERS[page]}
        said = [str(c.value) for c in at.caption
                if "from the link is not available" in str(c.value)]  # fmt: skip
        for key, label in shown.items():  # not on this view: Serving's hours, no scrapes
            assert sum(s.startswith(label + " '") for s in said) == 1, (page, key, value, said)
            assert at.query_params.get(key) in (None, []), (page, key)  # it left the link
        assert len(said) == len(shown), (page, value, said)


def test_names_show_literally_in_chromium(dash: Dashboard, page) -> None:
    """What only a browser shows: the hostile name as its own characters on every page that
    names it, and nothing drawn from it (bold, LaTeX, a link)."""
    for path in PAGES:
        open_app(page, dash.link(path) + "?" + urlencode({"host": hs.NAME}))
        assert page.locator(".katex, .katex-display").count() == 0, path
        assert page.locator("a[href^='http://pwned.invalid']").count() == 0, path
        strong = page.locator("[data-testid='stMarkdownContainer'] strong", has_text="bold")
        assert strong.count() == 0, path
    open_app(page, dash.link("hardware") + "?" + urlencode({"host": hs.NAME}))
    # as typed (a word joiner keeps the address after it from being linked)
    expect(page.get_by_text("**bold** $x$ :red[red] [click](http", exact=False).first
           ).to_be_visible()  # fmt: skip
    open_app(page, dash.link("hardware"))  # the newest gpu run: the 100 KB host's
    expect(page.get_by_text("h" * 79 + "…").first).to_be_visible()  # shortened on screen
