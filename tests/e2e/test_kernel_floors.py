"""The Kernel page leads with the floors of a stored real trace, in a real browser; its words
(AppTest, on the same store) name the inputs a trace lacks instead of guessing them, and the
Tradeoff page's reference case says how much of its AllReduce is above the floor."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard
from tests.helpers import FIXTURES, run_cli
from tests.pages import apptest

pytestmark = pytest.mark.e2e
LENS = FIXTURES / "traces" / "tracelens"
QWEN3_8B = FIXTURES / "serving" / "configs" / "Qwen--Qwen3-8B_config.json"
STEP = re.compile(r"Step: ([\d.]+) ms measured vs ([\d.]+) ms sum of floors: at most "
                  r"([\d.]+) ms to win")  # fmt: skip


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> tuple[Dashboard, dict, str]:
    tmp = tmp_path_factory.mktemp("floors")
    store = tmp / "stepscope.duckdb"
    # SGLang on an MI300X, imported with its model: every input known
    sglang = run_cli(store, "trace", str(LENS / "sglang_qwen3_8b_decode.json.gz"),
                     "--model", str(QWEN3_8B), "--json")  # fmt: skip
    assert sglang.code == 0, sglang.stderr
    # vLLM gpt-oss-20b: no model given, and the trace names no GPU
    vllm = run_cli(store, "trace", str(LENS / "vllm_mi300x_decode_fullgraph_bs32.json.gz"),
                   "--json")  # fmt: skip
    assert vllm.code == 0, vllm.stderr
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d, sglang.json, vllm.json["run_id"]
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_the_page_leads_with_the_floors_of_a_real_trace(dash, page) -> None:
    d, sglang, _ = dash
    open_app(page, d.link(f"kernels?run={sglang['run_id']}"))
    main = _main(page)
    first = main.get_by_test_id("stPlotlyChart").first
    expect(first).to_contain_text("Measured vs physical floor per step")  # the first chart
    expect(first).to_contain_text("gemm")
    m = STEP.search(main.inner_text())
    assert m, main.inner_text()
    floors = sglang["floors"]  # what `trace --json` said at import
    assert float(m[1]) == pytest.approx(floors["step"]["measured_us"] / 1e3, abs=0.006)
    assert float(m[2]) == pytest.approx(floors["step"]["floor_us"] / 1e3, abs=0.006)
    assert float(m[2]) < float(m[1])
    text = main.inner_text()
    assert "Missing floor inputs" not in text
    assert "Qwen--Qwen3-8B" in text and "AMD Instinct MI300X" in text  # the inputs used
    # the chart sits above the communication section
    chart_y = first.bounding_box()["y"]
    comm_y = main.get_by_role("heading", name="Communication").bounding_box()["y"]
    assert chart_y < comm_y
    # the breakdown's floor column
    table = main.get_by_test_id("stDataFrame").first
    expect(table).to_contain_text("floor_us_per_step")
    expect(main.get_by_role("button", name="CSV").first).to_be_visible()


def _floor_warning(at) -> str:  # noqa: ANN001 - an AppTest
    (warning,) = [apptest.as_read(w.value) for w in at.warning
                  if "Missing floor inputs" in w.value]  # fmt: skip
    return warning


def test_missing_inputs_are_named_on_the_page(dash) -> None:
    """The page's words (AppTest): the inputs the trace lacks, each named."""
    d, _, vllm = dash
    warning = _floor_warning(apptest.open_clean(d.store, "pages/kernels.py", {"run": vllm}))
    assert "model:" in warning and "host: the trace names no GPU" in warning
    # the host given by the link: only the model is missing now, and bytes floors are drawn
    at = apptest.open_clean(d.store, "pages/kernels.py", {"run": vllm, "fhost": "MI300X"})
    warning = _floor_warning(at)
    assert "model:" in warning and "host:" not in warning
    assert at.query_params["fhost"] == "MI300X"  # kept in the link


def test_the_reference_case_says_how_much_allreduce_is_above_its_floor(dash) -> None:
    """The Tradeoff page's default view (the published reference case), its words (AppTest)."""
    at = apptest.open_clean(dash[0].store, "pages/tradeoff.py")
    text = apptest.read_text(at, tab="Published figures vs the model")
    assert "127 calls x 26.9 us at 14,336 B = 3.42 ms" in text
    assert "at most 7.75 ms (69%) of the published 11.17 ms is above the PCIe latency floor" in text
