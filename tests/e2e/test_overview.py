"""Overview in a real browser: this machine's host run, and a shared link reopening a view."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    Dashboard,
    choose,
    on_first_screen,
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
    main = page.get_by_test_id("stMain")
    cards = main.get_by_test_id("stMetric")
    expect(cards.filter(has_text="Hosts")).to_contain_text("2")
    sentence = main.get_by_text("2 hosts report; every collector ran successfully in the last "
                                "24 h; no python -m collectors check has run yet")  # fmt: skip
    hosts = page.locator(".st-key-hosts")
    # The first screen (1400x900): the cards, the sentence and the hosts table.
    on_first_screen(page, cards.first, sentence, hosts)
    expect(hosts).to_contain_text(socket.gethostname())
    expect(hosts).to_contain_text("gpu-node-7")


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
        expect(main.get_by_test_id("stMetric").filter(has_text="Hosts")).to_contain_text("1")
        expect(other.locator(".st-key-hosts")).to_contain_text("gpu-node-7")
        assert socket.gethostname() not in other.locator(".st-key-hosts").inner_text()
    finally:
        fresh.close()


def _main_text(pg) -> str:
    return pg.locator("[data-testid='stMain']").inner_text()


def test_deep_link_as_first_request_after_server_start(dash: Dashboard, tmp_path: Path, page):
    """A shared link opened before anyone visited / must still run through app.py."""
    fresh = start_dashboard(dash.store, tmp_path / "fresh.log")
    try:
        open_app(page, fresh.link("overview?host=gpu-node-7"))
        expect(page.locator(".st-key-hosts")).to_contain_text("gpu-node-7")
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_text("Host", exact=True)).to_be_visible()  # app.py's sidebar
        nav = [t.strip() for t in page.locator("[data-testid='stSidebarNavLink']").all_inner_texts()]
        assert "ui" not in nav and "app" not in nav  # not Streamlit's folder-based page list
    finally:
        stop_dashboard(fresh)
