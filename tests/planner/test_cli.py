"""``python -m planner`` as a user runs it: JSON shape, text, bad input, lint dispatch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.models import MODEL_PRESETS
from tests.helpers import ROOT, cli_env, run_cli

KINDS = {"tp", "tp_ep_dp1", "tp_attn_ep_moe", "dp_attn_ep", "tp_dp", "tp_fast_allreduce",
         "downcast"}  # fmt: skip


def planner(*args: str, store: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    e = cli_env(store) if store else {**os.environ, "PYTHONPATH": str(ROOT)}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_preset_json_shape() -> None:
    p = planner("--preset", "reference-kimi-k25-rtxpro6000", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert {x["kind"] for x in data["layouts"]} == KINDS
    for lay in data["layouts"]:
        assert {"name", "kind", "tp", "dp", "ep", "compliant", "violations", "points"} <= set(lay)
        assert lay["compliant"] == (not lay["violations"])
        for pt in lay["points"]:
            assert {"concurrency", "tpot_ms", "tokens_per_s", "breakdown_ms"} <= set(pt)
            assert {"allreduce", "all_to_all"} <= set(pt["breakdown_ms"])
            assert pt["tpot_ms"] == pytest.approx(sum(pt["breakdown_ms"].values()), abs=1e-3)
    assert [r["concurrency"] for r in data["recommended"]] == [1, 2, 4, 8, 16, 32, 64, 128,
                                                               256, 512]  # fmt: skip
    names = {x["name"]: x for x in data["layouts"]}
    assert all(r["layout"] is None or names[r["layout"]]["compliant"] for r in data["recommended"])
    assert data["published"]["label"] == "published figures"
    tp = names["TP=8"]["points"][0]
    assert tp["breakdown_ms"]["allreduce"] == pytest.approx(9.594, abs=1e-3)


def test_model_file_and_text_output(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(MODEL_PRESETS["minimax-m2.5"]))
    p = planner("--model", str(cfg), "--host", "h200-sxm-8x", "--report", "1,64",
                "--layouts", "tp,dp_attn_ep,downcast")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "TPOT ms by concurrency" in p.stdout and "Recommended" in p.stdout
    assert "BLOCKED: kv-cache-native" in p.stdout and "TP=4 x DP=2" not in p.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nope", "--host", "h100-sxm-8x"], "neither a model preset"),
        (["--model", "kimi-k2.5"], "--host is required"),
        (["--model", "kimi-k2.5", "--host", "h100-sxm-8x", "--concurrency", "0-4"],
         "whole numbers >= 1"),
        (["--model", "kimi-k2.5", "--host", "h100-sxm-8x", "--layouts", "zz"], "layout 'zz'"),
        (["--model", "kimi-k2.5", "--host", "h100-sxm-8x", "--concurrency", "x"], "give numbers"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_1(args: list[str], message: str) -> None:
    p = planner(*args)
    assert p.returncode == 1 and message in p.stderr
    assert p.stderr.startswith("planner: ") and len(p.stderr.strip().splitlines()) == 1


def test_bad_config_and_policy_files(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(
        '{"model_type": "x", "hidden_size": 8, "num_hidden_layers": 2, '
        '"num_attention_heads": 2, "vocab_size": 9, '
        '"quantization_config": {"quant_method": "q9"}}'
    )
    p = planner("--model", str(bad), "--host", "h100-sxm-8x")
    assert p.returncode == 1 and "unknown quantization method" in p.stderr
    pol = tmp_path / "policy.toml"
    pol.write_text('name = "x"\nversion = "1"\n[[rule]]\nid = "a"\nkind = "vibes"\n'
                   'component = "weights"\nsentence = "s"\nrationale = "r"\n')  # fmt: skip
    p = planner("--model", "kimi-k2.5", "--host", "h100-sxm-8x", "--policy", str(pol))
    assert p.returncode == 1 and "unknown rule kind 'vibes'" in p.stderr
    assert "Traceback" not in p.stderr


def test_usage_error_exit_2() -> None:
    assert (
        planner("--model", "kimi-k2.5", "--preset", "reference-kimi-k25-rtxpro6000").returncode == 2
    )


def test_stored_host_without_gpus_and_unknown_host(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert run_cli(store, "gpu", "--host", "cpu-box").code == 0  # no NVIDIA GPU here
    p = planner("--model", "kimi-k2.5", "--host", "cpu-box", store=store)
    assert p.returncode == 1 and "no GPUs recorded" in p.stderr
    p = planner("--model", "kimi-k2.5", "--host", "elsewhere", store=store)
    assert p.returncode == 1 and "no `gpu` run for it" in p.stderr


def test_lint_dispatches_to_the_policy_linter(tmp_path: Path) -> None:
    cmd = tmp_path / "serve.sh"
    cmd.write_text("vllm serve moonshotai/Kimi-K2.5 -tp 8 --kv-cache-dtype fp8\n")
    p = planner("lint", str(cmd), "--native", "kimi-k2.5")
    assert p.returncode != 0 and "kv-cache-native" in p.stdout + p.stderr


def test_isl_osl_set_the_context_and_add_the_serving_prediction() -> None:
    p = planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--isl", "8192", "--osl",
                "1024", "--report", "1,64", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert "8704 tokens per sequence" in json.dumps(data["assumptions"])  # I + O/2
    serving = data["serving"]
    assert (serving["isl"], serving["osl"]) == (8192, 1024)
    by = {x["layout"]: x for x in serving["layouts"]}
    assert {x["name"] for x in data["layouts"]} == set(by)
    tp = by["TP=8"]["points"]
    assert [x["concurrency"] for x in tp] == [1, 64]
    for x in tp:
        assert x["tpot_low_ms"] < x["tpot_ms"] < x["tpot_high_ms"]
    assert by["TP attention + EP MoE (write-up estimate)"]["why_not"]
    assert "does not fit" in by["TP=2 x DP=4"]["why_not"]


def test_isl_without_osl_is_one_line() -> None:
    p = planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--isl", "8192")
    assert p.returncode == 1 and p.stderr.strip() == "planner: --isl and --osl go together"
