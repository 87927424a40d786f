"""The host choice (pages/helpers/host_choice.py) in a real browser: presets, the store's hosts
(`gpu` runs through the NVML stand-in) and uploaded host files, good and bad, on the Tradeoff
page, and the same choice on the Serving page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    Dashboard,
    answer_on_first_screen,
    choose,
    open_app,
    open_tab,
    pareto_traces,
    start_dashboard,
    stop_dashboard,
    wait_app,
)
from tests.gpu.conftest import PCIE, fake_env
from tests.helpers import run_cli
from tests.pages import apptest
from tests.planner.test_host_file import H20_141, TOML
from tests.vllm import bench_fixtures

pytestmark = pytest.mark.e2e
HOST = "rtx-node-2"
TRADEOFF = "tradeoff?setup=custom&model=kimi-k2.5"
SLOW_MS = 30_000  # a replan on 2 shared cores can take longer than expect's 5 s default
WAITING = "Upload a host file (JSON or TOML) to plan for it: its fields are in docs/planner.md."


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> tuple[Dashboard, str, Path]:
    """A store with an 8x RTX PRO 6000 `gpu` run and a vLLM sweep of Kimi-K2.5 on it."""
    tmp = tmp_path_factory.mktemp("host-choice")
    store = tmp / "stepscope.duckdb"
    gpu = run_cli(store, "gpu", "--host", HOST, "--json", **fake_env(PCIE))
    assert gpu.code == 0, gpu.stderr
    bench_fixtures.write_sweep(tmp / "tp8", tp=8)
    bench = run_cli(store, "vllm-bench", "--results", str(tmp / "tp8"), "--host", HOST)
    assert bench.code == 0, bench.stderr
    files = tmp / "files"
    files.mkdir()
    (files / "h20.toml").write_text(TOML)
    (files / "bad.json").write_text(json.dumps({**H20_141, "memory_gb": -141}))
    (files / "typo.json").write_text(json.dumps({**H20_141, "interconnect": "nvlnk"}))
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d, gpu.json["run_id"], files
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def _host_box(pg, label: str = "Host"):
    # the label exactly: "Calibrate to this host's measurements" holds "host" too
    exact = pg.locator("label").filter(has_text=re.compile(f"^{re.escape(label)}$"))
    return _main(pg).locator("[data-testid='stSelectbox']").filter(has=exact)


def _upload(pg, path: Path) -> None:
    pg.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(str(path))
    wait_app(pg)


def test_presets_and_stored_hosts_are_offered_and_in_the_link(dash, page) -> None:
    """... and a stored host's first screen (1400x900) answers: the answer sentence and the
    Pareto chart, with the host's measured sweep of the model as points on it."""
    d, gpu_run, _ = dash
    page.set_viewport_size({"width": 1400, "height": 900})
    open_app(page, d.link(f"{TRADEOFF}&hw=preset:h20-141g-8x"))
    expect(page.get_by_text("Assumptions and sources")).to_be_visible(timeout=SLOW_MS)
    assert "8x NVIDIA H20-3e" in _main(page).inner_text()
    box = _host_box(page)
    stored = f"{HOST}: 8x NVIDIA RTX PRO 6000 Blackwell Server Edition (gpu run {gpu_run})"
    box.get_by_role("combobox").click()
    listed = page.locator("[data-testid='stSelectboxVirtualDropdown']").inner_text()
    page.keyboard.press("Escape")
    for label in ("h20-8x (preset)", "h20-141g-8x (preset)", stored,
                  "upload a host file (JSON or TOML)"):  # fmt: skip
        assert label in listed
    choose(page, box, page.get_by_role("option", name=stored))
    page.wait_for_url(f"**hw=gpu%3A{gpu_run}**")
    expect(page.get_by_text("Assumptions and sources")).to_be_visible(timeout=SLOW_MS)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    best = _planner_answer(d.store, "--model", "kimi-k2.5", "--host-from-store", HOST)
    answer_on_first_screen(page, best.layout, best.tok_s_per_gpu, best.max_concurrency)
    assert "measured: TP8 (vLLM)" in " ".join(pareto_traces(page))  # the stored sweep
    assert f"measured gpu run {gpu_run} on {HOST}" in open_tab(page, "Assumptions and sources")
    for tab in ("Best layout at each concurrency", "TPOT and TTFT by concurrency",
                "Every point (table)", "Findings", "Hypotheses: unmeasured collectives",
                "What the policy costs", "Commands to measure"):  # fmt: skip
        assert open_tab(page, tab).strip(), tab  # every block that moved below is there


def _planner_answer(store: Path, *argv: str):
    """``python -m planner ARGV --store S`` under the page's default targets."""
    from planner.cli import build_parser, run_plan
    from planner.tradeoff.slo import Targets, meet_targets

    args = build_parser().parse_args([*argv, "--store", str(store)])
    best = meet_targets(run_plan(args), Targets(50.0, 2000.0)).best
    assert best is not None
    return best


def test_older_links_with_a_bare_preset_still_open(dash) -> None:
    """The page's logic (AppTest): an older link's bare preset name plans for that preset,
    and the link the page keeps names it as today's ``preset:`` choice."""
    d, _, _ = dash
    at = apptest.open_clean(d.store, "pages/tradeoff.py", {"setup": "custom", "model": "kimi-k2.5",
                                                          "hw": "h20-141g-8x"})  # fmt: skip
    assert "Assumptions and sources" in [t.label for t in at.tabs]
    assert "8x NVIDIA H20-3e" in apptest.read_text(at)
    assert at.query_params["hw"] == "preset:h20-141g-8x"


def test_uploaded_host_file_then_bad_files_show_one_line(dash, page) -> None:
    d, _, files = dash
    open_app(page, d.link(f"{TRADEOFF}&hw=preset:h200-sxm-8x"))
    choose(page, _host_box(page), page.get_by_role("option", name="upload a host file"))
    page.wait_for_url("**hw=file**")
    expect(_main(page).locator("[data-testid='stAlertContentInfo']")).to_have_text(WAITING)
    expect(page.get_by_text("Assumptions and sources")).to_have_count(0)
    _upload(page, files / "h20.toml")
    expect(page.get_by_text("Assumptions and sources")).to_be_visible(timeout=SLOW_MS)
    text = _main(page).inner_text()
    assert "8x NVIDIA H20-3e" in text and "1024 in / 1024 out" in text
    assert "host file h20.toml: vendor sheet, rev 2" in open_tab(page, "Assumptions and sources")
    for name, line in (("bad.json", "host file bad.json: field 'memory_gb': -141 must be > 0"),
                       ("typo.json", "host file typo.json: field 'interconnect': 'nvlnk' is not "
                        "one of pcie, nvlink (did you mean nvlink?)")):  # fmt: skip
        _upload(page, files / name)
        alert = _main(page).locator("[data-testid='stAlertContentError']")
        expect(alert).to_have_text(line)
        assert page.locator("[data-testid='stException']").count() == 0
        assert "Traceback" not in _main(page).inner_text()
        expect(page.get_by_text("Assumptions and sources")).to_have_count(0)


def test_serving_page_predicts_for_an_uploaded_host(dash, page) -> None:
    d, _, files = dash
    open_app(page, d.link("serving"))
    main = _main(page)
    expect(main.get_by_text("planner predicts").first).to_be_visible()
    box = _host_box(page, "Hardware for the planner's prediction")
    choose(page, box, page.get_by_role("option", name="upload a host file"))
    _upload(page, files / "h20.toml")
    expect(main.get_by_text("Planner prediction (dashed)")).to_be_visible()
    assert "on: h20-box (host file h20.toml: vendor sheet, rev 2)" in main.inner_text()
    _upload(page, files / "bad.json")
    expect(main.locator("[data-testid='stAlertContentError']")).to_have_text(
        "host file bad.json: field 'memory_gb': -141 must be > 0")  # fmt: skip
    assert page.locator("[data-testid='stException']").count() == 0
