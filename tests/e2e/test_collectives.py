"""Collectives in a real browser: curves, the cliff annotation, PCIe vs NVLink side by side,
and a copied link reopening the same view in a fresh browser context; the nccl-tests figure's
words through AppTest on the same store."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.comm.nccl_samples import half, row
from tests.e2e.conftest import (
    Dashboard,
    on_first_screen,
    open_app,
    start_dashboard,
    stop_dashboard,
    wait_app,
)
from tests.helpers import query, run_cli
from tests.pages import apptest

pytestmark = pytest.mark.e2e
TOKENS = (1, 2, 4, 8, 16, 32)


def _alltoall_log(host: str, gpu: str, times: tuple[float, ...]) -> str:
    """An 8-rank bf16 alltoall nccl-tests log sized as tokens per GPU x 7168 x bf16."""
    lines = ["# nccl-tests version 2.18.1 nccl-headers=22105 nccl-library=22105",
             "# Collective test starting: alltoall_perf"]  # fmt: skip
    lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r:5d} on {host} device {r:2d} "
              f"[0000:{16 + r:02x}:00] {gpu}" for r in range(8)]  # fmt: skip
    lines.append("#       size         count      type   redop    root     time   algbw   busbw "
                 "#wrong     time   algbw   busbw #wrong")  # fmt: skip
    for t, us in zip(TOKENS, times, strict=True):
        size = 8 * t * 7168 * 2
        lines.append(row(size, t * 7168, "bfloat16", "none", "-1", half(size, us, "alltoall", 8),
                         half(size, us * 1.02, "alltoall", 8)))  # fmt: skip
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("collectives")
    store = tmp / "stepscope.duckdb"
    pcie = tmp / "alltoall_pcie.log"
    pcie.write_text(_alltoall_log("pcie-box", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                  (19.0, 21.0, 25.0, 30.0, 1007.0, 1950.0)))  # fmt: skip
    nvl = tmp / "alltoall_nvl.log"
    nvl.write_text(_alltoall_log("nvl-box", "NVIDIA H200", (12.0, 12.5, 13.0, 14.0, 16.0, 19.0)))
    for path, klass in ((pcie, "pcie-only"), (nvl, "nvlink")):
        res = run_cli(store, "nccl-tests", str(path), "--interconnect", klass)
        assert res.code == 0, res.stderr
    res = run_cli(store, "comm", "--ops", "all_reduce", "--tokens", "1,2,4", "--hidden", "64",
                  "--iters", "3", "--warmup", "1")  # fmt: skip
    assert res.code == 0, res.stderr
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d
    stop_dashboard(d)


def _run_id(store: Path, host: str) -> str:
    return query(store, "SELECT run_id FROM runs WHERE host = ?", [host])[0][0]


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_pcie_and_nvlink_side_by_side_with_cliff(dash: Dashboard, page) -> None:
    pcie, nvl = _run_id(dash.store, "pcie-box"), _run_id(dash.store, "nvl-box")
    open_app(page, dash.link(f"collectives?runs={pcie}&runs={nvl}"))
    main = _main(page)
    expect(main.get_by_text("Interconnect: pcie-only")).to_be_visible()
    expect(main.get_by_text("Interconnect: nvlink")).to_be_visible()
    # two latency charts side by side, plus the busbw chart
    expect(main.locator("[data-testid='stPlotlyChart']")).to_have_count(3)
    # the cliff found on the PCIe curve is annotated on the chart and written out
    expect(main.get_by_text("cliff all_to_all @ 16 tok (1007 us").first).to_be_visible()
    expect(main).to_contain_text("cliff at 16 tokens: 1007 us")
    expect(main).to_contain_text("(flat up to 8 tokens)")
    text = main.inner_text()
    nvl_line = next(line for line in text.splitlines() if "nvl-box" in line and "→" in line)
    assert "no cliff" in nvl_line
    # The first screen (1400x900) answers: the sentence and both latency charts; the run and
    # axis pickers sit below them.
    sentence = main.get_by_text("2 curve(s) from 2 run(s): 1 with a latency cliff; the earliest "
                                "is all_to_all at 16 tokens per GPU (1007 us")  # fmt: skip
    charts = main.get_by_test_id("stPlotlyChart")
    on_first_screen(page, sentence, charts.nth(0), charts.nth(1))
    runs = main.get_by_test_id("stMultiSelect").first.bounding_box()
    assert runs is not None and runs["y"] > charts.nth(0).bounding_box()["y"]


def test_default_view_link_reopens_in_fresh_context(dash: Dashboard, page, browser) -> None:
    newest = query(dash.store, "SELECT run_id FROM runs ORDER BY finished_at DESC, run_id DESC")
    open_app(page, dash.link("collectives"))
    page.wait_for_url(f"**runs={newest[0][0]}**")  # the newest run, by absolute id
    expect(_main(page).get_by_text("tokens per GPU").first).to_be_visible()
    page.get_by_test_id("stRadio").get_by_text("bytes", exact=True).click()
    wait_app(page)
    page.wait_for_url("**x=bytes**")
    link = page.url
    assert f"runs={newest[0][0]}" in link

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    other = fresh.new_page()
    try:
        open_app(other, link)
        main = _main(other)
        expect(main.get_by_text("Latency per call vs size")).to_be_visible()
        expect(main.locator("[data-testid='stPlotlyChart']").first).to_be_visible()
        assert newest[0][0][:10] in main.inner_text()
    finally:
        fresh.close()


def test_nccl_tests_figure_puts_comm_and_imports_on_one_axis(dash: Dashboard) -> None:
    """?figure=nccl-tests: comm's burst mean over ranks, imports' own time, one chart (the
    page's words, through AppTest on the module's store)."""
    pcie, comm = _run_id(dash.store, "pcie-box"), query(
        dash.store, "SELECT run_id FROM runs WHERE verb = 'comm'")[0][0]  # fmt: skip
    burst = query(dash.store, "SELECT nccl_tests_us FROM v_comm_results WHERE run_id = ? "
                  "ORDER BY tokens_per_rank", [comm])  # fmt: skip
    text = apptest.words(dash.store, "pages/collectives.py", {"runs": [pcie, comm],
                                                              "figure": "nccl-tests"})  # fmt: skip
    assert "Figure: nccl-tests style: burst mean, averaged over ranks" in text
    comm_line = next(line for line in text.splitlines() if "all_reduce" in line and "→" in line)
    assert f"1 tokens → {burst[0][0]:.1f} us" in comm_line
    assert "cliff at 16 tokens: 1007 us" in text  # the import is unchanged
