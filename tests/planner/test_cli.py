"""``python -m planner`` as a user runs it: JSON shape, text, bad input, lint dispatch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from planner.specs.models import MODEL_PRESETS
from tests.helpers import planner_cli, run_cli

KINDS = {"tp", "tp_ep_dp1", "tp_attn_ep_moe", "dp_attn_ep", "tp_dp", "tp_fast_allreduce",
         "downcast"}  # fmt: skip


def planner(*args: str, store: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return planner_cli(*args, store=store, **env)


def test_preset_json_shape() -> None:
    p = planner("--preset", "reference-kimi-k25-rtxpro6000", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert {x["kind"] for x in data["layouts"]} == KINDS
    assert (data["isl"], data["osl"], data["engine"]) == (1024, 1024, "vllm")
    for lay in data["layouts"]:
        assert {"name", "kind", "tp", "dp", "ep", "compliant", "violations", "points",
                "hypothesis", "predict", "engine", "why_not"} <= set(lay)  # fmt: skip
        assert lay["compliant"] == (not lay["violations"])
        assert lay["predict"].startswith("python -m planner predict --preset ")
        for pt in lay["points"]:
            assert {"concurrency", "tpot_ms", "tpot_ms_low", "tpot_ms_high", "ttft_ms",
                    "ttft_ms_low", "ttft_ms_high", "tokens_per_s", "breakdown_ms"} <= set(pt)
            assert {"allreduce", "all_to_all", "experts", "prefill"} <= set(pt["breakdown_ms"])
            if lay["why_not"]:  # does not fit: no numbers, and the reason
                assert pt["tpot_ms"] is None and "does not fit" in lay["why_not"]
                continue
            assert pt["tpot_ms"] == pytest.approx(sum(pt["breakdown_ms"].values()), abs=1e-3)
            assert pt["tpot_ms_low"] < pt["tpot_ms_high"]
    assert [r["concurrency"] for r in data["recommended"]] == [1, 2, 4, 8, 16, 32, 64, 128,
                                                               256, 512]  # fmt: skip
    names = {x["name"]: x for x in data["layouts"]}
    for r in data["recommended"]:
        assert r["layout"] is None or (names[r["layout"]]["compliant"]
                                       and not names[r["layout"]]["hypothesis"])  # fmt: skip
    assert data["published"]["label"] == "published figures"
    tp = names["TP=8"]["points"][0]
    # 123 calls on AIConfigurator's published NCCL curve (26.7-47.8 us from 8 KB to 128 KB)
    assert 123 * 0.0267 <= tp["breakdown_ms"]["allreduce"] <= 123 * 0.0478


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


def test_isl_osl_engine_are_the_workload_every_layout_is_predicted_for() -> None:
    p = planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--isl", "8192", "--osl",
                "1024", "--report", "1,64", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    # InferenceX's client (the default) draws lengths uniform in [0.8 L, L]
    assert "inputs uniform in [6553, 8192], outputs in [819, 1024]" in json.dumps(
        data["assumptions"])  # fmt: skip
    by = {x["name"]: x for x in data["layouts"]}
    tp = by["TP=8"]
    assert [x["concurrency"] for x in tp["points"]] == [1, 64]
    assert "--isl 8192 --osl 1024" in tp["predict"]
    est = by["TP attention + EP MoE (write-up estimate)"]
    assert est["engine"] == "sglang" and est["hypothesis"]  # SGLang-only, unmeasured a2a
    assert "does not fit" in by["TP=2 x DP=4"]["why_not"]
    sg = json.loads(planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--engine",
                            "sglang", "--report", "1", "--json").stdout)  # fmt: skip
    assert {x["engine"] for x in sg["layouts"]} == {"sglang"}


def test_bad_workload_is_one_line() -> None:
    p = planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--osl", "1")
    assert p.returncode == 1 and p.stderr.strip() == "planner: --isl must be >= 1 and --osl >= 2"
    p = planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--num-prompts", "-1")
    assert p.returncode == 1 and "--num-prompts" in p.stderr
    p = planner("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--engine", "trtllm",
                "--isl", "8192", "--token-budget", "4096")  # fmt: skip
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1
    assert "refuses a prompt longer than --max_num_tokens" in p.stderr and p.stdout == ""
