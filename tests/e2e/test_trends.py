"""Trends in a real browser, on a store of 30 nightly vllm-bench runs written through the
real parser and commit path: TPOT 12% slower from night 20 at concurrency 64 (vLLM and
NCCL upgraded that night), steady at 16. The regression, its change point and the version
change are on the page; a copied link reopens the same series; the CSV holds the runs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.analysis import histories as h
from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard, wait_app
from tests.helpers import query, run_cli

pytestmark = pytest.mark.e2e
UPGRADE = h.Plan(upgrade_night=20)
CHART_MS = 60_000  # a loaded 2-core box mounts Plotly charts seconds after the script ends
SWEEP = {64: h.Plan(step_night=20, step=0.12, seed=1), 16: h.Plan(seed=3)}


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("trends")
    store = tmp / "stepscope.duckdb"
    h.serving_history(store, "gpu-a", SWEEP, UPGRADE)
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def _tpot_series(store: Path, concurrency: int) -> str:
    return query(store, "SELECT DISTINCT series_id FROM v_series_points WHERE concurrency = ? "
                 "AND metric = 'median_tpot_ms'", [concurrency])[0][0]  # fmt: skip


def test_regressions_only_shows_the_change_point_and_the_upgrade(dash: Dashboard, page) -> None:
    open_app(page, dash.link("trends"))
    main = _main(page)
    expect(main.get_by_text("3 of 8 series regressed")).to_be_visible()
    # TPOT, ITL and output throughput at c=64; nothing at c=16, nothing for TTFT
    expect(main.locator("[data-testid='stPlotlyChart']")).to_have_count(3, timeout=CHART_MS)
    # Streamlit's markdown sets "->" as an arrow; the words are check's own
    alerts = [a.replace("\u2192", "->") for a in main.get_by_test_id("stAlert").all_inner_texts()]
    lines = [a for a in alerts if a.startswith("REGRESSION")]
    assert len(lines) == 3 and all(" c=64 " in a for a in lines), alerts
    tpot = next(a for a in lines if "median TPOT" in a)
    assert "-gpu-a-n020" in tpot and "vLLM 0.11.0 -> 0.11.1" in tpot
    # the change point and the version change are marked on the chart itself
    expect(main.get_by_text("regression +1").first).to_be_visible(timeout=CHART_MS)
    expect(main.get_by_text("vLLM 0.11.0 -> 0.11.1, NCCL 2.27.3 -> 2.28.3").first).to_be_visible(
        timeout=CHART_MS
    )
    # the command-line check says the same
    res = run_cli(dash.store, "check")
    assert res.code == 3 and tpot in res.stdout


def test_a_chosen_series_link_reopens_the_same_series(dash: Dashboard, page, browser) -> None:
    steady, stepped = _tpot_series(dash.store, 16), _tpot_series(dash.store, 64)
    open_app(page, dash.link(f"trends?series={steady}"))
    main = _main(page)
    expect(main.locator("[data-testid='stPlotlyChart']")).to_have_count(1, timeout=CHART_MS)
    expect(main.get_by_text("no lasting move of 5% or more")).to_be_visible()
    # add the stepped series in the picker, then copy the view's link
    main.get_by_test_id("stMultiSelect").get_by_role("combobox").click()
    page.get_by_role("option").filter(has_text="c=64 in=1024 out=128: median TPOT").click()
    page.keyboard.press("Escape")
    wait_app(page)
    page.wait_for_url(f"**series={stepped}**")
    expect(main.locator("[data-testid='stPlotlyChart']")).to_have_count(2, timeout=CHART_MS)
    page.get_by_role("button", name="Copy link").click()
    link = page.get_by_test_id("stCode").last.inner_text().strip()
    assert f"series={steady}" in link and f"series={stepped}" in link

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    other = fresh.new_page()
    try:
        open_app(other, link)
        again = _main(other)
        expect(again.locator("[data-testid='stPlotlyChart']")).to_have_count(2, timeout=CHART_MS)
        expect(again.get_by_text("regression +1").first).to_be_visible(timeout=CHART_MS)
        texts = again.get_by_test_id("stAlert").all_inner_texts()
        assert any("median TPOT" in t and " c=64 " in t for t in texts), texts
        assert other.url.count("series=") == 2
    finally:
        fresh.close()


def test_csv_export_holds_every_run_and_the_change_point(dash: Dashboard, page) -> None:
    stepped = _tpot_series(dash.store, 64)
    open_app(page, dash.link(f"trends?series={stepped}"))
    buttons = page.get_by_test_id("stDownloadButton")
    with page.expect_download() as csv_dl:
        buttons.filter(has_text="CSV").first.click()
    rows = list(csv.DictReader(io.StringIO(Path(csv_dl.value.path()).read_text())))
    assert len(rows) == 30 and csv_dl.value.suggested_filename == f"trends-{stepped}.csv"
    marked = [r for r in rows if r["change_point"]]
    assert [(r["run_id"][-4:], r["change_point"]) for r in marked] == [("n020", "regression")]
    assert "vLLM 0.11.0 -> 0.11.1" in rows[19]["versions_changed"]
    assert {r["engine_version"] for r in rows[:19]} == {"0.11.0"}
