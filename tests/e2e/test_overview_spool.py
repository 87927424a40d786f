"""Overview flags runs stuck in the spool (store busy or unreachable when collected)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from store.location import resolve
from store.spool.bundle import write_spool
from tests.e2e.conftest import open_app, start_dashboard, stop_dashboard
from tests.helpers import run_cli
from tests.store.bundles import host_bundle

pytestmark = pytest.mark.e2e


def test_overview_warns_about_a_growing_spool(tmp_path: Path, page) -> None:
    store = tmp_path / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0
    loc = resolve(store)
    d = start_dashboard(store, tmp_path / "st.log")
    try:
        open_app(page, d.url)
        expect(page.get_by_text("host(s):")).to_be_visible()
        assert "waiting in the spool" not in page.locator("[data-testid='stMain']").inner_text()
        # Two runs the store did not take (as after exit 75): the next view says so.
        for _ in range(2):
            write_spool(host_bundle(), loc.spool_dir)
        open_app(page, d.url)
        warning = page.get_by_text("2 run(s) are waiting in the spool")
        expect(warning).to_be_visible()
        assert "python -m collectors flush" in warning.inner_text()
        assert run_cli(store, "flush").code == 0
        open_app(page, d.url)
        expect(page.get_by_text("host(s):")).to_be_visible()
        assert "waiting in the spool" not in page.locator("[data-testid='stMain']").inner_text()
    finally:
        stop_dashboard(d)
