"""Serving page in a real browser: benchmarks imported by the real `vllm-bench` and
`sglang-bench` CLIs (vLLM and SGLang results of the same model side by side), metric
scrapes of the real test server (tests/vllm/server.py) by the real `vllm-metrics` CLI, and a
`gpu` run (NVML stand-in for an 8x RTX PRO 6000 PCIe host) for the planner's prediction."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from collectors.serving.load import LoadSpec, run_load
from tests.e2e.conftest import (
    Dashboard,
    on_first_screen,
    open_app,
    start_dashboard,
    stop_dashboard,
    wait_app,
)
from tests.gpu.conftest import PCIE, fake_env
from tests.helpers import ROOT, run_cli
from tests.pages import apptest
from tests.sglang import fixtures as sglang_fixtures
from tests.vllm import bench_fixtures

pytestmark = pytest.mark.e2e
HOST = "gpu-node-7"
MODEL = "moonshotai/Kimi-K2.5"


@pytest.fixture(scope="module")
def serving(tmp_path_factory) -> tuple[Dashboard, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("serving")
    store = tmp / "stepscope.duckdb"
    assert run_cli(store, "gpu", "--host", HOST, **fake_env(PCIE)).code == 0
    bench_fixtures.write_sweep(tmp / "tp8", tp=8)
    bench_fixtures.write_sweep(tmp / "dp8", tp=1, metadata=False)
    runs = {}
    for name, extra in (("tp8", ()), ("dp8", ("--server-args", f"vllm serve {MODEL} -tp 1 -dp 8 "
                                              "--enable-expert-parallel"))):  # fmt: skip
        res = run_cli(store, "vllm-bench", "--results", str(tmp / name), "--host", HOST, "--json",
                      *extra)  # fmt: skip
        assert res.code == 0, res.stderr
        runs[name] = res.json["run_id"]
    # SGLang bench_serving JSONL of the same model and layout (tests/sglang/fixtures.py), in
    # the shape that records the server's /get_server_info (its layout and scheduler).
    info = {"tp_size": 8, "dp_size": 1, "chunked_prefill_size": 4096,
            "scheduler_recv_interval": 30, "version": "0.5.4"}  # fmt: skip
    sglang_fixtures.write_jsonl(tmp / "sglang.jsonl", levels=(1, 4, 16, 64), tpot=7.5,
                                server_info=info)  # fmt: skip
    res = run_cli(store, "sglang-bench", "--results", str(tmp / "sglang.jsonl"), "--model", MODEL,
                  "--host", HOST, "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    runs["sglang"] = res.json["run_id"]
    # An SGLang server's sglang:* metrics, scraped before the vLLM ones (which stay the default).
    sgl_cfg = tmp / "sglang.json"
    sgl_cfg.write_text(json.dumps({"model": MODEL, "version": "0.5.4", "trace_dir": str(tmp)}))
    sgl = subprocess.Popen([sys.executable, "-m", "tests.sglang.server", str(sgl_cfg)], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        runs["sglang_url"] = f"http://127.0.0.1:{sgl.stdout.readline().split()[1]}"
        for _ in range(2):
            assert run_cli(store, "sglang-metrics", "--url", runs["sglang_url"], "--host",
                           HOST).code == 0  # fmt: skip
            run_load(LoadSpec(runs["sglang_url"], MODEL, num_requests=4, concurrency=2,
                              input_len=8, output_len=20))  # fmt: skip
    finally:
        sgl.terminate()
        sgl.wait(10)
    # Real CPU torch.profiler traces with vLLM-named steps (tests/vllm/make_traces.py: cheaper
    # than the profile collector's two gloo ranks, which tests/vllm uses).
    subprocess.run([sys.executable, "-m", "tests.vllm.make_traces", str(tmp / "made"), "2"],
                   cwd=ROOT, check=True, timeout=300)  # fmt: skip
    trace_dir = tmp / "torch_profiler_dir"
    trace_dir.mkdir()
    cfg = tmp / "server.json"
    cfg.write_text(json.dumps({"version": "0.16.0", "model": MODEL, "trace_dir": str(trace_dir),
                               "profiler": True, "flush_delay_s": 0.4, "trace_sources": [
                                   str(p) for p in sorted((tmp / "made").glob("*.json.gz"))]}))  # fmt: skip
    server = subprocess.Popen([sys.executable, "-m", "tests.vllm.server", str(cfg)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().split()[1]}"
        res = run_cli(store, "vllm-profile", "--url", url, "--trace-dir", str(trace_dir),
                      "--host", HOST, "--server-args", "-tp 2", "--settle", "1", "--json")  # fmt: skip
        assert res.code == 0, res.stderr
        runs["profile"] = res.json["run_id"]
        for _ in range(3):
            assert run_cli(store, "vllm-metrics", "--url", url, "--host", HOST).code == 0
            run_load(LoadSpec(url, MODEL, num_requests=4, concurrency=2, input_len=8,
                              output_len=20))  # fmt: skip
    finally:
        server.terminate()
        server.wait(10)
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d, runs
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_measured_tpot_with_planner_prediction_and_metrics(serving, page) -> None:
    dash, runs = serving
    open_app(page, dash.link("serving?calibrate=true"))  # calibrated mode: opt-in (seconds per host)
    main = _main(page)
    expect(main.get_by_text("planner predicts").first).to_be_visible()
    # The first screen (1400x900): the sentences and the measured-vs-predicted TPOT chart;
    # the model, run and hardware pickers sit below it.
    on_first_screen(page, main.get_by_text(f"(run {runs['tp8']}): median TPOT"),
                    main.get_by_test_id("stPlotlyChart").first)  # fmt: skip
    picker = main.get_by_test_id("stMultiSelect").first.bounding_box()
    assert picker is not None and picker["y"] > 900
    text = main.inner_text()
    assert f"vLLM · TP8 (run {runs['tp8']}): median TPOT" in text
    assert f"vLLM · TP1xDP8+EP (run {runs['dp8']}): median TPOT" in text
    assert f"SGLang 0.5.4 · TP8 (run {runs['sglang']}): median TPOT 7.3 ms" in text
    assert text.count("(error ") == 3  # every engine x layout overlaid with the planner's error
    assert (
        f"Planner prediction (dashed) for the same model and layout on: {HOST} (measured gpu "
        "run" in text
    )
    # Each engine's run is predicted as it ran (what its SGLang server reported).
    assert ("Engine scheduler as run (the run's --server-args, or what the server reported in "
            f"/get_server_info): sglang TP8 on {HOST}: chunked_prefill_size=4096 "
            "(/get_server_info) scheduler_recv_interval=30 (/get_server_info)") in text
    assert "3 scrape(s) in the last 24 h" in text and "generated tok/s" in text
    assert f"Newest {runs['profile']}: {MODEL} on vLLM 0.16.0, TP2, 2 rank trace(s)" in text
    expect(main.get_by_test_id("stPlotlyChart")).to_have_count(4)
    # Each prediction's measured-error band: said in words and drawn as a shaded area.
    assert ("Shaded around each prediction of the mean (statistic: mean): where the measured "
            "TPOT fell for 80% of") in text
    assert "vllm/int4: measured within" in text and "sglang/*: measured within" in text
    # The calibration's own check (planner.cost.calibrate, as on the Tradeoff page): fitted on
    # the host's three sweeps, each layout held back in turn; these made-up sweeps are far from
    # the model in both directions, so it is not applied and says so.
    assert (f"{HOST}: not applied: it did not beat the fitted model on your held-back points "
            "(checked on 12 points of TP=1 DP=8 (attention) EP=8, TP=8: ") in text
    # the band is drawn on the mean's prediction (the median view above says so)
    open_app(page, dash.link("serving?calibrate=true&stat=mean"))
    expect(main.get_by_text("Shaded around each prediction: where the measured TPOT")).to_be_visible()
    wait_app(page)  # the caption is drawn before the charts: read them once the run finished
    bands = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .flatMap(gd => (gd.data || []).filter(t => t.fill === 'toself').map(t => t.name))""")
    assert {"TP8 planner band", "TP1xDP8+EP planner band"} <= set(bands), bands
    # The engines' runs of the same model and layout side by side, in the charts and a table.
    expect(main.get_by_text("Engines side by side")).to_be_visible()
    legend = main.get_by_test_id("stPlotlyChart").first.inner_text()
    assert "SGLang 0.5.4 TP8 measured" in legend and "vLLM TP8 measured" in legend
    grid = main.get_by_test_id("stDataFrame").first
    expect(grid).to_contain_text("SGLang 0.5.4 TPOT")
    expect(grid).to_contain_text("vLLM TPOT")
    for name in ("CSV", "HTML"):
        expect(main.get_by_role("button", name=name).first).to_be_visible()
    page.wait_for_url(f"**runs=*{runs['tp8']}*")  # absolute run ids in the URL


def test_copied_link_reopens_the_same_view(serving, page, browser) -> None:
    dash, runs = serving
    open_app(page, dash.link("serving"))
    main = _main(page)
    main.get_by_test_id("stRadioOption").filter(has_text="p99").click()
    wait_app(page)
    # Drop the DP8 run from the multiselect: its chip's remove button.
    main.get_by_role("button", name=re.compile(f"Remove {runs['dp8']}")).click()
    wait_app(page)
    page.wait_for_url("**stat=p99**")
    link = page.url
    assert runs["tp8"] in link and runs["sglang"] in link and runs["dp8"] not in link
    fresh = browser.new_context()
    other = fresh.new_page()
    try:
        open_app(other, link)
        m = _main(other)
        expect(m.get_by_text("p99 TPOT").first).to_be_visible()
        text = m.inner_text()
        assert f"TP8 (run {runs['tp8']}): p99 TPOT" in text and "TP1xDP8+EP" not in text
        assert f"SGLang 0.5.4 · TP8 (run {runs['sglang']}): p99 TPOT" in text
    finally:
        fresh.close()


def test_tradeoff_sglang_only_layout_names_its_measure_command(serving) -> None:
    """The Tradeoff page's SGLang-only layout (TP attention + EP MoE at DP=1) says how to
    launch and measure it (planner/tradeoff/engine_commands.py): its words, through AppTest."""
    dash, _ = serving
    at = apptest.open_clean(dash.store, "pages/tradeoff.py")
    text = apptest.read_text(at, tab="Commands to measure")
    assert "runs on SGLang only" in text
    assert ("python -m sglang.launch_server --model-path MODEL --tp 8 --ep 8 --moe-a2a-backend "
            "deepep --deepep-dispatcher-output-dtype bf16") in text  # fmt: skip
    assert "python -m collectors sglang-bench --url http://HOST:30000 --concurrency" in text


def test_sglang_metrics_open_from_a_link(serving, page) -> None:
    dash, runs = serving
    key = quote(f"SGLang · {HOST} · {runs['sglang_url']} · {MODEL}")
    open_app(page, dash.link(f"serving?server={key}"))
    main = _main(page)
    expect(main.get_by_text("ITL between scrapes").first).to_be_visible()
    text = main.inner_text()
    assert "2 scrape(s) in the last 24 h" in text and "mean ITL" in text
