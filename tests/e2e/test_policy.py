"""Policy page in a real browser: paste a command for a verdict, stored trace runs that break
the policy, and a copied link reopening the same run and checkpoint in a fresh context."""

from __future__ import annotations

import csv
import io
from pathlib import Path

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
    expect(main).to_contain_text("full-precision version 1.0.0")  # the rules, below
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
    sentence = main.get_by_text("1 of 2 trace runs comply with full-precision v1.0.0; 1 break "
                                "it (communication-native in 1 run), 0 need review.")  # fmt: skip
    table = page.locator(".st-key-policy_runs")
    # The first screen (1400x900): the counts and the table of the runs that break it.
    on_first_screen(page, sentence, table)
    expect(table).to_contain_text(fp8)
    expect(table).to_contain_text("ncclDevKernel_AllReduce_Sum_f8e4m3")
    assert bf16 not in table.inner_text()  # the default view: runs to look at
    # ... and the CSV holds every run, whatever the table shows.
    with page.expect_download() as csv_dl:
        main.get_by_test_id("stDownloadButton").filter(has_text="CSV (every run)").click()
    rows = list(csv.DictReader(io.StringIO(Path(csv_dl.value.path()).read_text())))
    assert {(r["run_id"], r["verdict"], r["rules"]) for r in rows} == {
        (fp8, "breaks the policy", "communication-native"), (bf16, "compliant", "")}
    wait_app(page)
    # The every-finding CSV (its frame built on the click): the FP8 run's findings, only.
    with page.expect_download() as findings_dl:
        main.get_by_test_id("stDownloadButton").filter(has_text="every finding").click()
    found = list(csv.DictReader(io.StringIO(Path(findings_dl.value.path()).read_text())))
    assert {r["run_id"] for r in found} == {fp8}
    assert {(r["level"], r["rule_id"]) for r in found} >= {("violation", "communication-native")}
    wait_app(page)
    # The rules sit below the answer.
    rules = main.get_by_text("The policy's rules").bounding_box()
    assert rules is not None and rules["y"] > table.bounding_box()["y"]


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
        expect(other.get_by_test_id("stMain")).to_contain_text(f"Run {fp8}: ")
        text = main_text(other)
        assert "Checkpoint precision: DeepSeek-V3 (FP8 blocks)." in text and fp8 in text
        assert "finding(s), one per rank and kernel" in text and "checkpoint assumed" not in text
    finally:
        fresh.close()
