"""Expert load page in a real browser: a DeepSeek-V3 recording (SGLang's JSON form) beside a
profiled trace of the same model (sglang-profile against the SGLang-shaped test server) and
URL-bound choices; the empty state and the Tradeoff page pricing on the recording are the
pages' words, through AppTest on the same store."""

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
)
from tests.expert_load import recordings as rec
from tests.helpers import run_cli
from tests.pages import apptest
from tests.trace.synth import graph_decode_trace
from tests.vllm.conftest import ServerProc

pytestmark = pytest.mark.e2e
MODEL = "deepseek-ai/DeepSeek-V3"


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> tuple[Dashboard, dict, str]:
    tmp = tmp_path_factory.mktemp("experts")
    store = tmp / "stepscope.duckdb"
    counts = rec.skewed_counts(rec.deepseek_v3())
    load = run_cli(store, "expert-load", str(rec.write_json(tmp / "ds.json", counts)),
                   "--model", MODEL, "--json")  # fmt: skip
    assert load.code == 0, load.stderr
    # A profile of the same model: the test SGLang server exports two CUDA-graph decode ranks
    # (Kineto's shape, real kernel names: MoE routing and GEMMs, an AllGather).
    traces = [graph_decode_trace(tmp / f"src-{r}.json.gz", r, 2, steps=4) for r in range(2)]
    trace_dir = tmp / "traces"
    trace_dir.mkdir()
    server = ServerProc.launch("tests.sglang.server", {
        "model": MODEL, "version": "0.5.4", "tp": 2, "trace_dir": str(trace_dir),
        "trace_sources": [str(p) for p in traces], "flush_delay_s": 0.2}, tmp / "srv.json",
        trace_dir)  # fmt: skip
    try:
        prof = run_cli(store, "sglang-profile", "--url", server.url, "--trace-dir", str(trace_dir),
                       "--num-requests", "2", "--concurrency", "2", "--output-len", "4",
                       "--settle", "1", "--flush-timeout", "60", "--json")  # fmt: skip
    finally:
        server.stop()
    assert prof.code == 0, prof.stderr
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d, load.json, prof.json["run_id"]
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_heatmap_imbalance_and_trace_of_the_same_model(dash, page) -> None:
    d, load, trace_id = dash
    open_app(page, d.link("experts"))
    page.wait_for_url(re.compile(r"run="))
    assert f"run={load['run_id']}" in page.url  # absolute: a link never means "newest"
    main = _main(page)
    expect(main.get_by_text("Layers x experts")).to_be_visible()
    ratios = [x["max_over_mean"] for x in load["per_layer"] if x["max_over_mean"]]
    sentence = main.get_by_text(f"{min(ratios):.1f}x to {max(ratios):.1f}x the layer's mean "
                                "expert")  # fmt: skip
    # The first screen (1400x900): the sentence and the heatmap.
    on_first_screen(page, sentence, main.get_by_test_id("stPlotlyChart").first)
    expect(page.locator("[data-testid='stPlotlyChart']")).to_have_count(5)
    heat = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .flatMap(gd => (gd.data || []).map(t => t.type))""")
    assert "heatmap" in heat
    at8 = load["per_rank"]["8"]
    expect(main.get_by_text(re.compile(
        rf"At EP=8: .*contiguous \(engine default\): {at8['contiguous_max_over_mean']:.2f}x in "
        "the worst layer"))).to_be_visible()  # fmt: skip
    expect(main.get_by_text(f"Trace run {trace_id}: milliseconds per step")).to_be_visible()
    expect(main.get_by_text(re.compile(r"MoE kernels \d+\.\d+ ms"))).to_be_visible()
    assert page.get_by_role("button", name="CSV").count() >= 5
    assert page.get_by_role("button", name="HTML").count() >= 5


def test_ep_size_is_bound_to_the_url(dash, page) -> None:
    d, load, _ = dash
    open_app(page, d.link(f"experts?run={load['run_id']}"))
    box = page.get_by_test_id("stSelectbox").filter(has_text="EP size, per layer")
    choose(page, box, page.get_by_role("option", name="16", exact=True))
    page.wait_for_url(re.compile(r"ep=16"))
    at16 = load["per_rank"]["16"]["balanced_max_over_mean"]
    expect(_main(page).get_by_text(re.compile(rf"At EP=16: balanced \(EPLB-style packing\): "
                                              rf"{at16:.2f}x"))).to_be_visible()  # fmt: skip
    # the copied link reopens the same view
    link = page.url
    open_app(page, link)
    expect(_main(page).get_by_text(re.compile(r"At EP=16:"))).to_be_visible()


def test_empty_state_names_the_command(dash) -> None:
    """The page's words (AppTest): a host with no recording is told the commands."""
    d, _, _ = dash
    text = apptest.read_text(apptest.open_clean(d.store, "pages/experts.py", {"host": "nobody"}))
    assert "No expert-load runs for host nobody yet" in text
    assert ("python -m collectors expert-load expert_distribution_recorder_*.pt --model "
            "deepseek-v3") in text  # fmt: skip
    assert re.search(r"expert-load --url http://127\.0\.0\.1:30000", text), text


def test_tradeoff_prices_the_recorded_routing(dash) -> None:
    """The Tradeoff page's words (AppTest) on the recording named by the link."""
    d, load, _ = dash
    at = apptest.open_clean(d.store, "pages/tradeoff.py", {
        "setup": "custom", "model": "deepseek-v3", "hw": "preset:h200-sxm-8x",
        "experts": load["run_id"], "cmax": "32"})  # fmt: skip
    assert re.search(r"a balanced placement would win", apptest.read_text(at, tab="Findings"))
    text = apptest.read_text(at, tab="Assumptions and sources")
    assert "measured (contiguous placement)" in text and load["run_id"] in text
