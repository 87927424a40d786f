"""Policy page in a real browser: paste a command for a verdict, stored trace runs that break
the policy, and a copied link reopening the same run and checkpoint in a fresh context."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    Dashboard,
    choose,
    open_app,
    start_dashboard,
    stop_dashboard,
    wait_app,
)
from tests.helpers import ROOT
from tests.policy.fp8_trace import import_fp8_and_bf16_runs

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (ROOT / "store/migrations/0002_trace.sql").exists(),
        reason="the trace tables (migration 0002) are not in this tree yet",
    ),
]
RECIPE = """export VLLM_MARLIN_INPUT_DTYPE=fp8
vllm serve moonshotai/Kimi-K2.5 \\
  --tensor-parallel-size 8 \\
  --kv-cache-dtype fp8
"""


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("policy-page")
    store, ids = import_fp8_and_bf16_runs(tmp)
    d = start_dashboard(store, tmp / "streamlit.log")
    d.ids = ids  # type: ignore[attr-defined]
    yield d
    stop_dashboard(d)


def pick(pg, label: str, option: str) -> None:
    """Choose ``option`` in the selectbox labelled ``label``."""
    box = pg.get_by_test_id("stMain").get_by_test_id("stSelectbox").filter(has_text=label)
    choose(pg, box, pg.get_by_role("option", name=option, exact=False))


def main_text(pg) -> str:
    return pg.locator("[data-testid='stMain']").inner_text()


def test_paste_command_gives_verdict(dash: Dashboard, page) -> None:
    open_app(page, dash.link("policy"))
    main = page.get_by_test_id("stMain")
    expect(main).to_contain_text("full-precision version 1.0.0")
    expect(main).to_contain_text("kv-cache-native")  # the rules table lists every rule id
    page.get_by_label("Launch command, unit or env file").fill(RECIPE)
    page.get_by_role("button", name="Check").click()
    wait_app(page)
    expect(main).to_contain_text(
        "Verdict: NOT COMPLIANT with full-precision v1.0.0: 2 violation(s)"
    )
    expect(main).to_contain_text("violation activations-native line 1: VLLM_MARLIN_INPUT_DTYPE=fp8")
    expect(main).to_contain_text("violation kv-cache-native line 4: --kv-cache-dtype fp8")
    # A compliant command after it.
    page.get_by_label("Launch command, unit or env file").fill("vllm serve m -tp 8\n")
    page.get_by_role("button", name="Check").click()
    wait_app(page)
    expect(page.get_by_text("Verdict: compliant with full-precision")).to_be_visible()


def test_stored_runs_with_violations(dash: Dashboard, page) -> None:
    open_app(page, dash.link("policy"))
    fp8, bf16 = dash.ids["fp8-allreduce"], dash.ids["bf16-allreduce"]  # type: ignore[attr-defined]
    main = page.get_by_test_id("stMain")
    expect(main).to_contain_text(
        f"Checked 2 trace run(s): 1 break the policy ({fp8}), 0 need review."
    )
    expect(main).to_contain_text("violation communication-native run " + fp8)
    # One verdict row per stored run, then the findings (of the flagged run only).
    for rid, label, verdict in ((fp8, "fp8-allreduce", r"breaks the policy\s+1\s+1"),
                                (bf16, "bf16-allreduce", r"compliant\s+0\s+0")):  # fmt: skip
        row = re.compile(rf"{rid}\s+\S+\s+{label}\s+{verdict}")
        expect(main).to_contain_text(row, use_inner_text=True)
    findings = main_text(page).split("\nRun\n", 1)[1]
    assert "ncclDevKernel_AllReduce_Sum_f8e4m3" in findings and bf16 not in findings


def test_link_reopens_run_and_checkpoint(dash: Dashboard, page, browser) -> None:
    fp8 = dash.ids["fp8-allreduce"]  # type: ignore[attr-defined]
    open_app(page, dash.link("policy"))
    pick(page, "Checkpoint", "DeepSeek-V3 (FP8 blocks)")
    pick(page, "Run", fp8)
    page.wait_for_url(f"**run={fp8}**")
    link = page.url
    assert "native=deepseek-v3" in link
    fresh = browser.new_context()
    other = fresh.new_page()
    try:
        open_app(other, link)
        expect(other.get_by_test_id("stMain")).to_contain_text("communication-native run")
        text = main_text(other)
        assert "Checkpoint precision: DeepSeek-V3 (FP8 blocks)." in text and fp8 in text
        assert "communication-native run" in text and "checkpoint assumed" not in text
    finally:
        fresh.close()
