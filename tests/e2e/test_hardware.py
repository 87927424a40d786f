"""Hardware page in a real browser: stores filled by the real ``gpu`` CLI (NVML stand-in
specs for a PCIe-only and an NVSwitch host, the real pynvml for this GPU-less machine); what
the page says of a host without GPUs, through AppTest on the same store."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    Dashboard,
    choose,
    on_first_screen,
    open_app,
    start_dashboard,
    stop_dashboard,
    wait_app,
)
from tests.gpu.conftest import NVLINK, PCIE, fake_env
from tests.helpers import run_cli
from tests.pages import apptest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hw(tmp_path_factory) -> tuple[Dashboard, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("hardware")
    store = tmp / "stepscope.duckdb"
    runs = {}
    for host, env in (("pcie-box", fake_env(PCIE)), ("hgx", fake_env(NVLINK)),
                      ("cpu-box", {"STEPSCOPE_NVML_MODULE": "pynvml"})):  # fmt: skip
        result = run_cli(store, "gpu", "--json", "--host", host, **env)
        assert result.code == 0, result.stderr
        runs[host] = result.json["run_id"]
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d, runs
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_pcie_host_sentence_and_matrices(hw, page) -> None:
    dash, runs = hw
    open_app(page, dash.link("hardware?host=pcie-box"))
    main = _main(page)
    expect(
        main.get_by_text("8x NVIDIA RTX PRO 6000 Blackwell Server Edition, PCIe-only")
    ).to_be_visible()
    text = main.inner_text()
    assert "no NVLink; P2P read OK on all 56 pairs." in text
    assert "16 GPU pair(s) cross CPU sockets (SYS)" in text
    assert "GPU 7 at Gen1 x16" in text  # the idle link below its Gen5 maximum
    page.wait_for_url(f"**run={runs['pcie-box']}**")  # the newest run, named absolutely
    topo, p2p = main.get_by_test_id("stTable").nth(0), main.get_by_test_id("stTable").nth(1)
    # The URL update reruns the page: wait until the rerun has drawn both matrices again
    # (read mid-rerun, the first table found was the P2P one).
    expect(topo).to_contain_text("PIX")
    expect(p2p).to_contain_text("OK")
    topo_text = topo.inner_text()
    for label in ("PIX", "NODE", "SYS", "0-47,96-143", "48-95,144-191"):
        assert label in topo_text
    assert "NV" not in topo_text.replace("NUMA", "")
    assert p2p.inner_text().count("OK") == 56
    assert "SYS = PCIe and the CPU-to-CPU interconnect" in text  # the legend
    for name in ("CSV", "HTML"):
        expect(main.get_by_role("button", name=name).first).to_be_visible()

    # Moving the sidebar's host filter moves the view to that host's newest run.
    choose(page, page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox"),
           page.get_by_role("option", name="hgx"))  # fmt: skip
    page.wait_for_url(f"**run={runs['hgx']}**")
    expect(main.get_by_text("8x NVIDIA H100 80GB HBM3, NVLink")).to_be_visible()


def test_nvlink_host_view_reopens_from_a_copied_link(hw, page, browser) -> None:
    dash, runs = hw
    open_app(page, dash.link("hardware"))
    main = _main(page)
    choose(page, main.get_by_test_id("stSelectbox"),
           page.get_by_role("option", name=re.compile(runs["hgx"])))  # fmt: skip
    page.wait_for_url(f"**run={runs['hgx']}**")
    expect(main.get_by_text("NVLink between all 28 GPU pairs (NV18 on 28)")).to_be_visible()
    assert "every GPU has 18 active NVLink 4 link(s), to NVSwitch" in main.inner_text()
    # The sentence can draw before the rerun has replaced the previous run's tables: wait for
    # the topology matrix itself (CI once read the P2P table in its place).
    topo = main.get_by_test_id("stTable").nth(0)
    expect(topo).to_contain_text("NV18")
    assert topo.inner_text().count("NV18") == 56
    main.get_by_role("radio", name="nvlink").click()
    wait_app(page)
    page.wait_for_url("**p2p=nvlink**")
    expect(main.get_by_text("nvidia-smi topo -p2p n")).to_be_visible()

    page.get_by_role("button", name="Copy link").click()
    link = page.get_by_test_id("stPopoverBody").get_by_test_id("stCode").inner_text().strip()
    assert runs["hgx"] in link and "p2p=nvlink" in link

    fresh = browser.new_context()
    other = fresh.new_page()
    try:
        open_app(other, link)
        view = _main(other)
        sentence = view.get_by_text("8x NVIDIA H100 80GB HBM3, NVLink")
        expect(sentence).to_be_visible()
        # The first screen (1400x900): the sentence and the topology matrix.
        on_first_screen(other, sentence, view.get_by_test_id("stTable").first)
        assert runs["hgx"] in view.inner_text()
        assert "nvidia-smi topo -p2p n" in view.inner_text()
        assert view.get_by_test_id("stTable").nth(1).inner_text().count("OK") == 56
    finally:
        fresh.close()


def test_host_without_gpu_says_so(hw) -> None:
    """The page's words (AppTest, on the module's store), as for the two below."""
    dash, runs = hw
    text = apptest.words(dash.store, "pages/hardware.py", {"host": "cpu-box",
                                                           "run": runs["cpu-box"]})  # fmt: skip
    assert "python -m collectors gpu" in text
    assert "Host cpu-box has no NVIDIA GPU" in text and "Interconnect class: none" in text


def test_host_with_no_gpu_run_shows_the_command(hw) -> None:
    dash, _ = hw
    text = apptest.words(dash.store, "pages/hardware.py", {"host": "nobody"})
    assert "python -m collectors gpu" in text
    assert "No GPU inventory for host nobody yet" in text
