"""Each page on a store with nothing for it (only a ``host`` run) or with no store at all
says which collector fills it and shows the exact command; the Tradeoff page still plans
from presets, and a stored host named by a link that is not there is said so.

Through AppTest, in this process (the page's words; no browser, no server). Each page's
browser test on real data is in tests/e2e."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.pages import apptest

PRESET = {"setup": "custom", "model": "deepseek-v3", "hw": "preset:h200-sxm-8x"}


@pytest.fixture(scope="module")
def host_only(tmp_path_factory) -> Path:
    """A store holding one ``host`` run, through the real CLI."""
    store = tmp_path_factory.mktemp("host-only") / "stepscope.duckdb"
    res = run_cli(store, "host")
    assert res.code == 0, res.stderr
    return store


@pytest.fixture(scope="module")
def missing(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("missing") / "nothing-here.duckdb"


def shown(store: Path, script: str, params: dict[str, str] | None = None) -> str:
    return apptest.page_text(apptest.open_clean(store, script, params))


@pytest.mark.parametrize("script, commands", [
    ("pages/kernels.py", ["python -m collectors profile", "python -m collectors trace PATH"]),
    ("pages/collectives.py", ["python -m collectors comm --tokens 1,2,4,8,16,32",
                              "python -m collectors nccl-tests"]),
    ("pages/serving.py", ["python -m collectors vllm-bench --results",
                          "python -m collectors vllm-metrics --url",
                          "python -m collectors vllm-profile --url"]),
    ("pages/trends.py", ["No series yet", "python -m collectors vllm-bench --results",
                         "python -m collectors nccl-tests", "python -m collectors trace"]),
])  # fmt: skip
def test_a_page_with_nothing_to_show_names_its_collectors(host_only, script, commands) -> None:
    text = shown(host_only, script)
    missing_commands = [c for c in commands if c not in text]
    assert not missing_commands, text


@pytest.mark.parametrize("script, command", [
    ("pages/overview.py", "python -m collectors host"),
    ("pages/policy.py", "python -m collectors trace PATH"),
])  # fmt: skip
def test_without_a_store_a_page_says_what_to_run(missing, script, command) -> None:
    assert command in shown(missing, script)
    assert not missing.exists()  # a reader never creates the store


def test_without_a_store_the_tradeoff_page_plans_from_presets(missing) -> None:
    text = shown(missing, "pages/tradeoff.py", PRESET)
    assert "Recommended (compliant, fits, on measured or fitted collectives)" in text
    assert "h200-sxm-8x" in text and "presets only" in text


def test_without_a_store_a_linked_host_is_said_to_be_missing(missing) -> None:
    with apptest.store_env(missing):
        at = apptest.open_page("pages/tradeoff.py", {**PRESET, "hw": "gpu:no-such-run"})
    assert not at.exception, at.exception[0].value
    assert "Host 'gpu:no-such-run' from the link is not available here" in apptest.page_text(at)
    assert "Assumptions and sources" in [t.label for t in at.tabs]
