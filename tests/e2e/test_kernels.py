"""Kernel breakdown in a real browser: a real profile run and a real imported trace set; what
the page says of each run (its sentences' numbers), through AppTest on the same store."""

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
from tests.helpers import FIXTURES, query, run_cli
from tests.pages import apptest
from tests.trace.graph_synth import TPOT_US, graph_run
from tests.trace.synth import graph_decode_trace

pytestmark = pytest.mark.e2e
HTA = FIXTURES / "traces" / "hta"
SENTENCE = re.compile(r"(\w+): (\d+) calls/step, ([\d.]+) us avg, ([\d.]+)% of step")


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> tuple[Dashboard, str, str]:
    ranks = sorted(HTA.glob("sampled_rank-*.json.gz"))
    if len(ranks) < 2:
        pytest.skip(f"fixture traces missing: {HTA}/sampled_rank-*.json.gz")
    tmp = tmp_path_factory.mktemp("kernels")
    store = tmp / "stepscope.duckdb"
    prof = run_cli(store, "profile", "--json", "--label", "tp2-cpu", "--layers", "2",
                   "--steps", "2", "--batch", "4", "--context", "64")  # fmt: skip
    assert prof.code == 0, prof.stderr
    graphs = tmp / "graph"
    graphs.mkdir()
    for r in range(2):  # a CUDA-graph decode run (Kineto's shape, real kernel names)
        graph_decode_trace(graphs / f"w_rank{r}.pt.trace.json.gz", r, 2, steps=4, layers=3)
    graph = run_cli(store, "trace", str(graphs), "--json", "--label", "graph")
    assert graph.code == 0, graph.stderr
    # vLLM's default mode: 4 ranks, 8 steps, untrustworthy GPU annotations (graph_synth)
    facts = graph_run(tmp / "vllm-graph")
    vllm_graph = run_cli(store, "trace", str(tmp / "vllm-graph"), "--json", "--label", "vllm-graph")
    assert vllm_graph.code == 0, vllm_graph.stderr
    trace = run_cli(store, "trace", *map(str, ranks), "--json", "--label", "hta-sampled")
    assert trace.code == 0, trace.stderr
    d = start_dashboard(store, tmp / "streamlit.log")
    d.graph_id = graph.json["run_id"]  # type: ignore[attr-defined]
    d.vllm_graph = (vllm_graph.json["run_id"], facts)  # type: ignore[attr-defined]
    yield d, prof.json["run_id"], trace.json["run_id"]
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_default_view_names_an_absolute_run(dash, page) -> None:
    d, _, trace_id = dash
    open_app(page, d.link("kernels"))
    page.wait_for_url(re.compile(r"run="))
    # The newest run, named by its id (a shared link must never mean "latest").
    assert f"run={trace_id}" in page.url
    expect(_main(page).get_by_text(trace_id).first).to_be_visible()
    assert f"run={trace_id}" in _share_link(page)


def _share_link(pg) -> str:
    """The link the page offers under "Copy link"."""
    pg.get_by_role("button", name="Copy link").click()
    body = pg.get_by_test_id("stPopoverBody")
    expect(body).to_contain_text("http")
    link = body.locator("code").inner_text().strip()
    pg.keyboard.press("Escape")
    return link


def test_profile_run_sentence_charts_and_numbers(dash, page) -> None:
    d, prof_id, _ = dash
    open_app(page, d.link(f"kernels?run={prof_id}"))
    main = _main(page)
    expect(main.get_by_text(re.compile(r"allreduce: \d+ calls/step"))).to_be_visible()
    # The first screen (1400x900): the step sentence and the per-category breakdown table.
    on_first_screen(page, main.get_by_text(re.compile(r"^Step: [\d.]+ ms mean wall per step")),
                    page.locator(".st-key-breakdown"))  # fmt: skip
    text = main.inner_text()
    found = {m[0]: m for m in SENTENCE.findall(text)}
    # Two layers: AllReduce after attention and after the MoE; one logits AllGather.
    assert found["allreduce"][1] == "4" and found["allgather"][1] == "1", text
    assert 0 < float(found["allreduce"][3]) < 100
    calls = query(d.store, "SELECT sum(calls) FROM trace_step_categories WHERE run_id = ? "
                  "AND category = 'allreduce'", [prof_id])[0][0]  # fmt: skip
    assert calls == 4 * 2 * 2  # per step x steps x ranks: the sentence is computed from data
    expect(main.get_by_test_id("stPlotlyChart")).to_have_count(4)
    assert "Top:" in text and re.search(r"allreduce in \S+: \d+ call\(s\)", text), text
    expect(main.get_by_role("button", name="CSV").first).to_be_visible()
    # a CPU profile records no device name: the caption says so, never "device nan"
    assert re.search(r"backend gloo, device CPU only \(no GPU events\)\.", text), text
    assert " nan" not in text


ANATOMY = re.compile(r"([\w ]+) (AllReduce|AllGather): (\d+) calls/step, ([\d.]+) ms "
                     r"\(([\d.]+)% of step\)")  # fmt: skip


def _words(d: Dashboard, **params: str) -> str:
    return apptest.words(d.store, "pages/kernels.py", params)  # AppTest, the module's store


def test_profile_run_step_anatomy(dash) -> None:
    """The profile workload: per layer one attention and one MoE AllReduce, one logits
    AllGather per step; the MoE one says what expert parallelism would remove."""
    d, prof_id, _ = dash
    text = _words(d, run=prof_id)
    found = {f"{m[0].strip()} {m[1]}": m for m in ANATOMY.findall(text)}
    assert found["MoE AllReduce"][2] == "2" and found["Attention AllReduce"][2] == "2", text
    assert found["Logits AllGather"][2] == "1", text
    assert "what expert parallelism would remove" in text
    stored = query(d.store, "SELECT sum(total_us) FROM trace_comm_sources WHERE run_id = ? "
                   "AND source = 'moe' AND in_steps", [prof_id])[0][0]  # fmt: skip
    steps = query(d.store, "SELECT count(*) FROM trace_steps WHERE run_id = ?", [prof_id])[0][0]
    assert float(found["MoE AllReduce"][3]) == pytest.approx(stored / steps / 1000, abs=0.006)
    assert re.search(r"All [\d,]+ top-level CPU ops \(CPU-only trace\) counted once", text)


def test_graph_run_shows_outside_steps_and_where_categories_come_from(dash) -> None:
    d, _, _ = dash
    text = _words(d, run=d.graph_id)
    assert "MoE AllReduce: 3 calls/step" in text
    m = re.search(r"All ([\d,]+) GPU events counted once: ([\d,]+) in steps, ([\d,]+) outside "
                  r"steps \(memory (\d+)", text)  # fmt: skip
    assert m, text
    total, inside, outside = (int(x.replace(",", "")) for x in m.groups()[:3])
    assert inside + outside == total and outside == int(m[4]) == 2 * 4
    assert "CUDA-graph replays" in text and "kernel names only" in text
    assert "Logits AllGather: 1 calls/step" in text


HEADLINE = re.compile(r"Step: ([\d.]+) ms mean wall per step and rank; largest category: "
                      r"(\w+) \(([\d.]+)% of step\)")  # fmt: skip


def test_cuda_graph_run_headline_is_the_step_spacing(dash) -> None:
    """Issue 20: a vLLM CUDA-graph run (31 ms TPOT built in) shows a step wall close to the
    step spacing, MoE at its share of GPU time, and the embedding AllReduce by name."""
    d, _, _ = dash
    run_id, facts = d.vllm_graph
    text = _words(d, run=run_id)
    m = HEADLINE.search(text)
    assert m, text
    assert float(m[1]) == pytest.approx(TPOT_US / 1000, rel=0.06), text  # was 137.99 ms
    share = 100 * facts.category_us_per_step["moe"] / facts.gpu_us_per_step
    assert m[2] == "moe" and float(m[3]) == pytest.approx(share, abs=2.0), text
    found = {f"{a.strip()} {b}": int(c) for a, b, c, *_ in ANATOMY.findall(text)}
    assert found["Embedding AllReduce"] == 1 and found["Attention AllReduce"] == facts.layers
    assert found["MoE AllReduce"] == facts.layers - facts.dense_layers, text


def test_imported_trace_shows_its_collectives(dash) -> None:
    d, _, trace_id = dash
    text = _words(d, run=trace_id)
    cats = {m[0] for m in SENTENCE.findall(text)}
    assert cats and cats <= {"allreduce", "all_to_all", "allgather", "reduce_scatter",
                             "other_comm"}, text  # fmt: skip
    assert "2 rank(s)" in text


def test_comparison_link_reopens_in_fresh_context(dash, page, browser) -> None:
    d, prof_id, trace_id = dash
    open_app(page, d.link(f"kernels?run={prof_id}"))
    box = _main(page).get_by_test_id("stSelectbox").filter(has_text="Second run")
    choose(page, box, page.get_by_role("option", name=re.compile("hta-sampled")))
    page.wait_for_url(re.compile(r"vs="))
    expect(_main(page).get_by_text("Step wall: A")).to_be_visible()
    link = _share_link(page)
    assert f"run={prof_id}" in link and f"vs={trace_id}" in link and link in page.url
    wall = _main(page).get_by_text("Step wall: A").inner_text()

    fresh = browser.new_context()
    other = fresh.new_page()
    try:
        open_app(other, link)
        main = _main(other)
        expect(main.get_by_text("Step wall: A")).to_be_visible()
        assert main.get_by_text("Step wall: A").inner_text() == wall
        assert "Largest change:" in main.inner_text()
        # ranks, per step, top kernels, collective dtypes, comparison
        expect(main.get_by_test_id("stPlotlyChart")).to_have_count(5)
    finally:
        fresh.close()
