"""The dashboard process never imports torch or vLLM, on any page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import open_app, start_dashboard, stop_dashboard
from tests.helpers import run_cli

pytestmark = pytest.mark.e2e
GUARD = Path(__file__).with_name("import_guard")


def test_every_page_renders_without_importing_torch_or_vllm(tmp_path: Path, page, monkeypatch):
    store = tmp_path / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0
    log = tmp_path / "imports.log"
    log.touch()
    monkeypatch.setenv("STEPSCOPE_IMPORT_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", f"{GUARD}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    dash = start_dashboard(store, tmp_path / "st.log")
    try:
        open_app(page, dash.url)
        # read in one call: a rerun redrawing the sidebar between a count and the n-th
        # link's read left that link missing (a 30 s timeout on a loaded machine)
        hrefs = page.locator("[data-testid='stSidebarNavLink']").evaluate_all(
            "links => links.map(a => a.getAttribute('href'))")  # fmt: skip
        assert len(hrefs) >= 9, hrefs  # every page of app.py
        for href in hrefs or [dash.url]:
            open_app(page, href if href.startswith("http") else dash.link(href))
        assert log.read_text() == "", f"dashboard imported: {log.read_text().split()}"
        assert "libtorch" not in Path(f"/proc/{dash.proc.pid}/maps").read_text()
    finally:
        stop_dashboard(dash)
