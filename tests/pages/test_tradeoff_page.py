"""The Tradeoff page's logic through Streamlit's AppTest (no browser): the targets in the link
decide the answer's cards, which are planner.meet_targets' answer for the same plan; nothing
meeting the targets says what fails; a value from the link is shown as text, never markup.
Where things sit on the screen is tests/e2e/test_tradeoff.py's business."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.specs import hardware, models
from planner.tradeoff.plan import plan
from planner.tradeoff.slo import Targets, meet_targets
from tests.pages import apptest
from tests.pages.apptest import unescaped

LINK = {"setup": "custom", "model": "deepseek-v3", "hw": "preset:h200-sxm-8x"}


@pytest.fixture(scope="module")
def deepseek_plan():
    return plan(models.preset("deepseek-v3"), hardware.preset("h200-sxm-8x"),
                concurrencies=range(1, 513))  # fmt: skip


def open_page(monkeypatch: pytest.MonkeyPatch, store: Path, **params: str):
    monkeypatch.setenv("STEPSCOPE_STORE", str(store))
    at = apptest.open_page("pages/tradeoff.py", params)
    assert not at.exception, at.exception[0].value
    return at


def test_the_link_s_targets_give_the_planner_s_answer(monkeypatch, tmp_path, deepseek_plan) -> None:
    at = open_page(monkeypatch, tmp_path / "none.duckdb", **LINK, tpot="30", ttft="800",
                   stat="p90")  # fmt: skip
    ans = meet_targets(deepseek_plan, Targets(30.0, 800.0, "p90"))
    b, r = ans.best, ans.runner_up
    assert b is not None and r is not None
    cards = {m.label: (m.value, m.delta) for m in at.metric}
    assert cards == {
        "Best layout": (b.layout, ""),
        "Output tokens/s per GPU": (f"{b.tok_s_per_gpu:.1f}",
                                    f"{b.tok_s_per_gpu / r.tok_s_per_gpu - 1:+.0%} vs runner-up"),
        "Concurrency": (str(b.max_concurrency), ""),
        "TPOT ms (p90)": (f"{b.tpot_ms:.1f}", ""), "TTFT ms (p90)": (f"{b.ttft_ms:,.0f}", ""),
    }  # fmt: skip
    captions = [unescaped(c.value) for c in at.caption]
    assert ans.stat == "p90" and not any("stands in" in c for c in captions)  # simulated p90
    assert ans.runner_up_sentence() in captions
    assert any(c.startswith("deepseek-v3 on 8x NVIDIA H200 (h200-sxm-8x), vllm, 1024 in / "
                            "1024 out; targets p90 TPOT <= 30 ms and TTFT <= 800 ms")
               for c in captions)  # fmt: skip
    assert (at.number_input(key="tpot").value, at.number_input(key="ttft").value) == (30, 800)
    assert at.query_params["stat"] == "p90"
    # Every block moved below the answer is still on the page, in its tab.
    tabs = [t.label for t in at.tabs]
    assert tabs == ["Best layout at each concurrency", "TPOT and TTFT by concurrency",
                    "Every point (table)", "Findings", "Hypotheses: unmeasured collectives",
                    "What the policy costs", "Commands to measure", "Assumptions and sources"]


def test_nothing_meets_and_a_link_value_shown_as_text(monkeypatch, tmp_path,
                                                      deepseek_plan) -> None:  # fmt: skip
    hostile = "**bold** $x$ :red[red] [click](http://x)"
    at = open_page(monkeypatch, tmp_path / "none.duckdb", **LINK, tpot="2", ttft="5000",
                   experts=hostile, calib=hostile)  # fmt: skip
    ans = meet_targets(deepseek_plan, Targets(2.0, 5000.0))
    assert ans.best is None and not at.metric
    warnings = [unescaped(w.value) for w in at.warning]
    assert ans.sentence() in warnings and "where TPOT fails first" in ans.sentence()
    shown = [w.value for w in at.warning if "from the link" in w.value]
    assert shown and all("\\*\\*bold\\*\\*" in w and "\\[click\\]" in w and "\\$x\\$" in w
                         and "\\:red\\[" in w for w in shown)  # fmt: skip


def test_calibrated_view_shows_its_check_on_the_host_s_stored_sweep(monkeypatch, tmp_path) -> None:
    """A measured TP=8 sweep of Kimi-K2.5, 25% slower than the model on this 8-GPU host,
    imported by the real `vllm-bench` CLI: the calibrated view fits it, holds back its top
    concurrencies, and shows the check (before -> after) it passed to be applied."""
    from tests.planner.test_calibrate_from_store import store_with_sweeps

    store, gpu_run = store_with_sweeps(tmp_path, {"tp": False})
    at = open_page(monkeypatch, store, setup="custom", model="kimi-k2.5", hw=f"gpu:{gpu_run}",
                   calib="host", view="calibrated", isl="1024", osl="256")  # fmt: skip
    assert "Calibration check" in [t.label for t in at.tabs]
    text = apptest.page_text(at)
    assert ("Calibration: calibrated on 6 points of TP=8; checked on 2 points of TP=8 "
            "(concurrency 16-32): 20% -> ") in text, text
    assert "factors: bandwidth x" in text and "request path" in text
