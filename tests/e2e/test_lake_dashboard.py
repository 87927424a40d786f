"""The dashboard on a lake: a real ``streamlit run`` with STEPSCOPE_STORE set to a lake URL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard
from tests.helpers import ROOT, run_cli
from tests.lake.conftest import Lake, migrated_lake, pg, s3  # noqa: F401 (PostgreSQL, S3 fixtures)

pytestmark = pytest.mark.e2e


def _dashboard(url: str, lake_env: dict[str, str], tmp_path: Path) -> Dashboard:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STEPSCOPE_STORE": url, **lake_env}
    return start_dashboard(url, tmp_path / "streamlit.log", env)


def test_overview_reads_the_lake_and_sees_new_commits(migrated_lake: Lake,  # noqa: F811
                                                      tmp_path: Path, page) -> None:  # fmt: skip
    unused = tmp_path / "unused.duckdb"
    for name in ("gpu-node-1", "gpu-node-2"):
        res = run_cli(unused, "host", "--store", migrated_lake.url, "--host", name,
                      **migrated_lake.env())  # fmt: skip
        assert res.code == 0, res.stderr
    dash = _dashboard(migrated_lake.url, migrated_lake.env(), tmp_path)
    url = dash.url
    try:
        open_app(page, f"{url}/overview")
        expect(page.get_by_text("2 hosts report")).to_be_visible()
        # A commit from another process shows on the next view (cache keyed on the snapshot).
        res = run_cli(unused, "host", "--store", migrated_lake.url, "--host", "gpu-node-3",
                      **migrated_lake.env())  # fmt: skip
        assert res.code == 0, res.stderr
        open_app(page, f"{url}/overview")
        expect(page.get_by_text("3 hosts report")).to_be_visible()
    finally:
        stop_dashboard(dash)


def test_every_page_opens_on_a_lake_in_s3(pg, s3, tmp_path: Path, page,  # noqa: F811
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Every kind of run the pages read (the scale benchmark's generator at a tiny size, the
    real migrations), moved into a lake whose data files are in a real S3 server (moto) by
    ``migrate``; then each page opened with its benchmark link: through AppTest (the store's
    queries the pages use, run against objects in the bucket, no exception, no error), and
    in Chromium from a real ``streamlit run`` on the lake for the pages that read the
    bucket's largest table and the run list."""
    from urllib.parse import urlencode

    from benchmarks.scale.generate import build_file
    from benchmarks.scale.pages import PAGE_FILES, links
    from store import reader
    from tests.lake.conftest import new_s3_lake
    from tests.pages import apptest

    lake_ = new_s3_lake(pg, s3, tmp_path, migrated=True)
    lake_.apply(monkeypatch)
    src = tmp_path / "src.duckdb"
    build_file(src, runs=11, kernel_rows=40_960, rank_steps=16, memory_limit="1GB", threads=2)
    res = run_cli(src, "migrate", "--to", lake_.url, "--json", **lake_.env())
    assert res.code == 0, res.stderr
    assert res.json["ok"] and res.json["new_runs"] == 11 + 1  # and the generator's check run
    assert res.json["tables"]["trace_kernels"] == {"source": 40_960, "copied": 40_960,
                                                   "target": 40_960}  # fmt: skip
    assert any("/trace_kernels/" in k for k in s3.keys(lake_.prefix))
    shared = links(lake_.url)
    reader.clear_cache()
    with apptest.store_env(lake_.url):
        for name, params in shared.items():
            at = apptest.open_page(PAGE_FILES[name], params)
            assert not at.exception, f"{name}: {at.exception[0].value}"
            assert not at.error, f"{name}: {at.error[0].value}"
            assert at.markdown or at.dataframe or at.info or at.success, f"{name} rendered nothing"
    dash = _dashboard(lake_.url, lake_.env(), tmp_path)
    try:
        for name, shows in (("kernels", "[data-testid='stPlotlyChart']"),
                            ("overview", "text=hosts report")):  # fmt: skip
            open_app(page, f"{dash.url}/{name}?{urlencode(shared[name], doseq=True)}")
            main = page.locator("[data-testid='stMain']")
            expect(main.locator(shows).first).to_be_visible()  # drawn from the bucket
            expect(main).not_to_contain_text("Traceback")
            alerts = page.locator("[data-testid='stAlertContentError']")
            assert alerts.count() == 0, f"{name}: {alerts.all_inner_texts()}"
    finally:
        stop_dashboard(dash)
