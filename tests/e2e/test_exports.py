"""Chart exports in a real browser: CSV of the chart's data, self-contained HTML."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.comm.nccl_samples import V2_18
from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard, wait_app
from tests.helpers import run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("exports")
    store = tmp / "stepscope.duckdb"
    log = tmp / "nccl.log"
    log.write_text(V2_18)
    assert run_cli(store, "nccl-tests", str(log)).code == 0
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d
    stop_dashboard(d)


def test_chart_exports_download_csv_and_self_contained_html(dash: Dashboard, page) -> None:
    open_app(page, dash.link("collectives"))
    expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible()
    buttons = page.get_by_test_id("stDownloadButton")
    with page.expect_download() as csv_dl:
        buttons.filter(has_text="CSV").first.click()
    csv_text = Path(csv_dl.value.path()).read_text()
    assert csv_dl.value.suggested_filename.endswith(".csv")
    assert "op" in csv_text.splitlines()[0] and len(csv_text.splitlines()) > 2
    wait_app(page)
    with page.expect_download(timeout=90_000) as html_dl:
        buttons.filter(has_text="HTML").first.click()
    html = Path(html_dl.value.path()).read_text()
    assert html_dl.value.suggested_filename.endswith(".html")
    assert "Plotly.newPlot" in html  # the figure itself
    assert '<script src="http' not in html  # plotly.js inlined: opens offline
    assert len(html) > 1_000_000
