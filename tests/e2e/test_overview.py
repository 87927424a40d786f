"""Overview in a real browser: this machine's host run, and a shared link reopening a view."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    Dashboard,
    choose,
    open_app,
    start_dashboard,
    stop_dashboard,
)
from tests.helpers import run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("overview")
    store = tmp / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0
    # A second, imported host so the filter has something to filter out.
    assert run_cli(store, "host", "--host", "gpu-node-7", "--label", "imported").code == 0
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d
    stop_dashboard(d)


def test_overview_shows_this_machines_host_run(dash: Dashboard, page) -> None:
    open_app(page, dash.url)
    expect(page.get_by_text("host(s):")).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    caption = _main_text(page)
    assert "2 host(s): " in caption
    assert socket.gethostname() in caption and "gpu-node-7" in caption


def test_host_filter_link_reopens_same_view(dash: Dashboard, page, browser) -> None:
    open_app(page, dash.url)
    choose(page, page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox"),
           page.get_by_role("option", name="gpu-node-7"))  # fmt: skip
    page.wait_for_url("**host=gpu-node-7**")
    link = page.url
    assert "host=gpu-node-7" in link

    fresh = browser.new_context()
    other = fresh.new_page()
    try:
        open_app(other, link)
        main = other.locator("[data-testid='stMain']")
        # The filtered view lists only that host's runs: our own hostname is gone.
        expect(main.get_by_test_id("stDataFrame").first).to_be_visible()
        assert "1 host(s): gpu-node-7" in main.inner_text()
    finally:
        fresh.close()


def _main_text(pg) -> str:
    return pg.locator("[data-testid='stMain']").inner_text()


def test_deep_link_as_first_request_after_server_start(dash: Dashboard, tmp_path: Path, page):
    """A shared link opened before anyone visited / must still run through app.py."""
    fresh = start_dashboard(dash.store, tmp_path / "fresh.log")
    try:
        open_app(page, fresh.link("overview?host=gpu-node-7"))
        expect(page.get_by_text("1 host(s): gpu-node-7")).to_be_visible()
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_text("Host", exact=True)).to_be_visible()  # app.py's sidebar
        nav = [t.strip() for t in page.locator("[data-testid='stSidebarNavLink']").all_inner_texts()]
        assert "ui" not in nav and "app" not in nav  # not Streamlit's folder-based page list
    finally:
        stop_dashboard(fresh)
