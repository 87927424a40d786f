"""Every page facing hostile query-string values: no exception, no script, store intact.

Every SQL value a page sends is a bound parameter and every URL value is treated as data;
this feeds SQL-injection, markup, path and size attacks into each parameter each page
keeps in its URL (and into parameters it does not know).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from tests.comm.nccl_samples import V2_18
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


def test_hostile_query_values_on_every_page(dash: Dashboard, page) -> None:
    before = _table_counts(dash.store)
    for path in _page_paths(page, dash):
        open_app(page, dash.link(path))
        # Parameters the page keeps in its URL for its default view, plus shared and unknown ones.
        names = {k for k, _ in parse_qsl(urlsplit(page.url).query)} | {"host", "run", "zzz"}
        for value in HOSTILE:  # every parameter at once: each must be handled on its own
            url = dash.link(path) + "?" + urlencode({name: value for name in sorted(names)})
            open_app(page, url)  # fails on any exception shown on the page
            assert page.evaluate("() => window.__pwned === undefined"), (path, value)
        expect(page.locator("[data-testid='stApp']")).to_be_visible()
    assert _table_counts(dash.store) == before
