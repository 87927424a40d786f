"""The dashboard on a lake: a real ``streamlit run`` with STEPSCOPE_STORE set to a lake URL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard
from tests.helpers import ROOT, run_cli
from tests.lake.conftest import Lake, lake, pg, s3  # noqa: F401 (PostgreSQL, S3 fixtures)

pytestmark = pytest.mark.e2e


def _dashboard(url: str, lake_env: dict[str, str], tmp_path: Path) -> Dashboard:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STEPSCOPE_STORE": url, **lake_env}
    return start_dashboard(url, tmp_path / "streamlit.log", env)


def test_overview_reads_the_lake_and_sees_new_commits(lake: Lake, tmp_path: Path, page) -> None:  # noqa: F811
    unused = tmp_path / "unused.duckdb"
    for name in ("gpu-node-1", "gpu-node-2"):
        res = run_cli(unused, "host", "--store", lake.url, "--host", name, **lake.env())
        assert res.code == 0, res.stderr
    dash = _dashboard(lake.url, lake.env(), tmp_path)
    url = dash.url
    try:
        open_app(page, f"{url}/overview")
        expect(page.get_by_text("2 host(s):")).to_be_visible()
        # A commit from another process shows on the next view (cache keyed on the snapshot).
        res = run_cli(unused, "host", "--store", lake.url, "--host", "gpu-node-3", **lake.env())
        assert res.code == 0, res.stderr
        open_app(page, f"{url}/overview")
        expect(page.get_by_text("3 host(s):")).to_be_visible()
    finally:
        stop_dashboard(dash)


def test_every_page_opens_on_a_lake_in_s3(pg, s3, tmp_path: Path, page,  # noqa: F811
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The dashboard in Chromium on a lake whose data files are in a real S3 server (moto):
    every page opened with a shared link, filled from the bucket, no exception shown."""
    from urllib.parse import urlencode

    from benchmarks.scale.generate import build_file
    from benchmarks.scale.pages import PAGE_FILES, links
    from tests.lake.conftest import new_s3_lake

    lake_ = new_s3_lake(pg, s3, tmp_path)
    lake_.apply(monkeypatch)
    src = tmp_path / "src.duckdb"
    build_file(src, runs=11, kernel_rows=40_960, rank_steps=16, memory_limit="1GB", threads=2)
    res = run_cli(src, "migrate", "--to", lake_.url, **lake_.env())
    assert res.code == 0, res.stderr
    assert any("/trace_kernels/" in k for k in s3.keys(lake_.prefix))
    dash = _dashboard(lake_.url, lake_.env(), tmp_path)
    url = dash.url
    try:
        for name, params in links(lake_.url).items():
            open_app(page, f"{url}/{Path(PAGE_FILES[name]).stem}?{urlencode(params, doseq=True)}")
            expect(page.locator("[data-testid='stMain']")).not_to_contain_text("Traceback")
            alerts = page.locator("[data-testid='stAlertContentError']")
            assert alerts.count() == 0, f"{name}: {alerts.all_inner_texts()}"
        open_app(page, f"{url}/overview")
        expect(page.get_by_text("host(s):").first).to_be_visible()
    finally:
        stop_dashboard(dash)
