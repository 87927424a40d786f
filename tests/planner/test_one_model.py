"""One cost model: every layout `python -m planner` lists is answered by `python -m planner
predict` with the same numbers (within 2%), at every reported concurrency, for several
models, hosts and engines, the reference preset and a stored host with a measured comm run.

Each layout's ``predict`` command comes from the plan's own ``--json``: the test runs what
a user would copy, through both real command-line entry points.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from planner.cli import build_parser as plan_parser
from planner.cli import run_plan, target_args
from planner.predict import build_parser as predict_parser
from planner.predict import run as predict_run
from planner.tradeoff.report_json import to_json
from tests.helpers import FIXTURES, ROOT

QWEN3_32B_FP8 = FIXTURES / "serving" / "configs" / "Qwen--Qwen3-32B-FP8_config.json"

CONC = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
CASES = [
    ["--model", "kimi-k2.5", "--host", "h200-sxm-8x"],
    ["--model", "kimi-k2.5", "--host", "rtx-pro-6000-pcie-8x", "--isl", "8192", "--osl", "512"],
    ["--model", "deepseek-v3", "--host", "b200-sxm-8x", "--engine", "sglang"],
    ["--model", "minimax-m2.5", "--host", "h100-sxm-8x", "--isl", "2048", "--osl", "256"],
    ["--model", "minimax-m2.5", "--host", "rtx-pro-6000-pcie-8x", "--num-prompts", "2000"],
    ["--model", "kimi-k2.5", "--host", "b200-sxm-8x", "--isl", "8192", "--token-budget", "2048"],
    ["--model", "deepseek-v3", "--host", "gb200-nvl72-4x", "--engine", "trtllm"],
    ["--preset", "reference-kimi-k25-rtxpro6000"],
    ["--model", str(QWEN3_32B_FP8), "--host", "l40s-pcie-8x"],  # a dense FP8 model on PCIe
]


def _agree(plan_argv: list[str]) -> int:
    """Compare every layout's points with its predict command; returns points compared."""
    args = plan_parser().parse_args([*plan_argv, "--report", ",".join(map(str, CONC))])
    data = to_json(run_plan(args), CONC, target_args(args))
    compared = 0
    for lay in data["layouts"]:
        argv = shlex.split(lay["predict"])[4:] + ["--concurrency", ",".join(map(str, CONC))]
        if lay["why_not"]:  # the plan says it cannot run: so does predict, in one line
            with pytest.raises(Exception, match="does not fit|cannot hold"):
                predict_run(predict_parser().parse_args(argv))
            continue
        got = predict_run(predict_parser().parse_args(argv))
        for mine, theirs in zip(lay["points"], got["points"], strict=True):
            assert theirs["concurrency"] == mine["concurrency"]
            for key in ("tpot_ms", "ttft_ms", "tpot_ms_low", "tpot_ms_high"):
                assert theirs[key] == pytest.approx(mine[key], rel=0.02), (lay["name"], key,
                                                                          mine["concurrency"])
            compared += 1
        assert got["policy"]["compliant"] == lay["compliant"], lay["name"]
    return compared


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a[:4]))
def test_planner_and_predict_agree_on_every_layout_and_concurrency(argv: list[str]) -> None:
    assert _agree(argv) >= 3 * len(CONC)


def test_stored_host_with_a_measured_comm_run_agrees(planner_store) -> None:
    s = planner_store
    assert _agree(["--model", str(QWEN3_32B_FP8), "--host-from-store", s.host, "--store",
                   str(s.path), "--comm-run", s.comm_run]) >= len(CONC)  # fmt: skip


def test_the_issue_example_through_both_commands() -> None:
    """`python -m planner` (what the Tradeoff page shows) and `predict` for TP=8 at c=1."""
    def cli(*a: str) -> dict:
        p = subprocess.run([sys.executable, "-m", "planner", *a, "--json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    plan = cli("--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--report", "1")
    tp8 = next(x for x in plan["layouts"] if x["name"] == "TP=8")["points"][0]["tpot_ms"]
    one = cli("predict", "--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--tp", "8", "--isl",
              "1024", "--osl", "1024", "--concurrency", "1")["points"][0]["tpot_ms"]  # fmt: skip
    assert tp8 == pytest.approx(one, rel=0.02)
    assert 7.0 < tp8 < 13.0  # measured vLLM runs of this model on 8x H200: about 10 ms
