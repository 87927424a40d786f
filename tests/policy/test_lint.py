"""``python -m planner lint``: every REFERENCE §3 downcast in commands, units and env files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.policy.lint import lint_text, main
from planner.specs.native import parse_hint
from tests.helpers import ROOT

KIMI_CONFIG = {
    "model_type": "kimi_k25",
    "torch_dtype": "bfloat16",
    "text_config": {"model_type": "deepseek_v3", "hidden_size": 7168},
    "quantization_config": {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "kv_cache_scheme": None,
        "config_groups": {"group_0": {"input_activations": None, "targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "group_size": 32, "strategy": "group",
            "symmetric": True}}},
    },
}  # fmt: skip
REFERENCE_TP8 = """vllm serve moonshotai/Kimi-K2.5 \\
  --tensor-parallel-size 8 \\
  --trust-remote-code \\
  --max-model-len 131072 \\
  --gpu-memory-utilization 0.92 \\
  --enable-auto-tool-choice --tool-call-parser kimi_k2 --reasoning-parser kimi_k2 \\
  --served-model-name kimi-k2.5 --port 8000
"""
COMMUNITY_RECIPE = """#!/usr/bin/env bash
# Kimi-K2.5 on 8x RTX PRO 6000 (community recipe)
export VLLM_MARLIN_INPUT_DTYPE=fp8
export VLLM_TEST_FORCE_FP8_MARLIN=1
vllm serve moonshotai/Kimi-K2.5 \\
  --tensor-parallel-size 8 \\
  --kv-cache-dtype fp8 \\
  --trust-remote-code
"""


def violations(text: str, native: str | None = None) -> list[tuple[str, int]]:
    result = lint_text(text, native=parse_hint(native) if native else None, name="t")
    return [(f.rule_id, f.line) for f in result.findings if f.level == "violation"]


def levels(text: str, native: str | None = None) -> dict[str, int]:
    result = lint_text(text, native=parse_hint(native) if native else None, name="t")
    return {k: result.count(k) for k in ("violation", "review", "note")}


@pytest.mark.parametrize(
    "text,expected",
    [
        # --kv-cache-dtype other than auto / the model dtype (vLLM and SGLang, both spellings)
        ("vllm serve m --kv-cache-dtype fp8", [("kv-cache-native", 1)]),
        ("vllm serve m --kv-cache-dtype=fp8_e5m2", [("kv-cache-native", 1)]),
        ("vllm serve m --kv_cache_dtype nvfp4", [("kv-cache-native", 1)]),
        ("vllm serve m --kv-cache-dtype turboquant_4bit", [("kv-cache-native", 1)]),
        ("python -m sglang.launch_server --model-path m --kv-cache-dtype fp8_e4m3",
         [("kv-cache-native", 1)]),
        ("python -m vllm.entrypoints.openai.api_server --model m --kv-cache-dtype fp8",
         [("kv-cache-native", 1)]),
        ("vllm serve m --kv-cache-dtype auto", []),
        ("vllm serve m --kv-cache-dtype bfloat16", []),
        # Marlin W4A16 -> W4A8, forced FP8 Marlin: env files, exports, prefixes, units
        ("VLLM_MARLIN_INPUT_DTYPE=fp8\n", [("activations-native", 1)]),
        ("# comment\nexport VLLM_MARLIN_INPUT_DTYPE=int8\n", [("activations-native", 2)]),
        ("[Service]\nEnvironment=VLLM_TEST_FORCE_FP8_MARLIN=1\nExecStart=/usr/bin/vllm serve m\n",
         [("weights-native", 2)]),
        # FP8 combine, NVFP4 dispatch
        ("export VLLM_FLASHINFER_MOE_A2A_LOW_PRECISION_COMBINE=1",
         [("communication-native", 1)]),
        ("VLLM_DEEPEPLL_NVFP4_DISPATCH=1 vllm serve m -dp 8 --enable-expert-parallel",
         [("dispatch-native", 1)]),
        # Quantized AllReduce (vLLM and SGLang names); FP mode casts BF16 -> FP16 by default
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4\n", [("communication-native", 1)]),
        ("ROCM_QUICK_REDUCE_QUANTIZATION=INT8 python3 -m sglang.launch_server --tp 8",
         [("communication-native", 1)]),
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=FP\n", [("communication-native", 1)]),
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=FP\nVLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16=1\n",
         [("communication-native", 2)]),
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=FP\nVLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16=0\n", []),
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=NONE\n", []),
        # SGLang DeepEP dispatch: FP8 unless bf16 is asked for
        ("python -m sglang.launch_server --model-path m --tp 8 --moe-a2a-backend deepep",
         [("dispatch-native", 1)]),
        ("python -m sglang.launch_server --model-path m --enable-deepep-moe", [("dispatch-native", 1)]),
        ("python -m sglang.launch_server --model-path m --moe-a2a-backend deepep "
         "--deepep-dispatcher-output-dtype bf16", []),
        ("SGLANG_DEEPEP_BF16_DISPATCH=1 python -m sglang.launch_server --moe-a2a-backend deepep", []),
        ("python -m sglang.launch_server --moe-a2a-backend=deepep "
         "--deepep-dispatcher-output-dtype int8", [("dispatch-native", 1)]),
        # Unrelated flags and the faster full-precision AllReduce are fine
        ("VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1 vllm serve m -tp 8", []),
        (REFERENCE_TP8, []),
    ],
)  # fmt: skip
def test_reference_checklist(text: str, expected: list[tuple[str, int]]) -> None:
    assert violations(text) == expected


def test_community_kimi_recipe_is_flagged_on_each_line() -> None:
    assert sorted(violations(COMMUNITY_RECIPE, "kimi-k2.5")) == [
        ("activations-native", 3), ("kv-cache-native", 7), ("weights-native", 4),
    ]  # fmt: skip


def test_reference_tp8_command_is_compliant_with_native_known() -> None:
    result = lint_text(REFERENCE_TP8, native=parse_hint("kimi-k2.5"))
    assert result.compliant and result.count("review") == 0
    assert result.verdict.startswith("compliant with full-precision v")


def test_native_precision_decides_fp8_dispatch_and_requantization() -> None:
    deepep = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --moe-a2a-backend deepep"
    assert violations(deepep, "deepseek-v3") == []  # FP8 dispatch is native for FP8 blocks
    assert violations(deepep, "kimi-k2.5") == [("dispatch-native", 1)]
    q = "vllm serve m --quantization fp8"
    assert levels(q) == {"violation": 0, "review": 1, "note": 0}  # not guessed without native
    assert violations(q, "bf16") == [("weights-native", 1)]
    assert violations(q, "fp8-block") == []
    assert levels(q, "kimi-k2.5") == {"violation": 0, "review": 0, "note": 1}  # format clash
    assert violations("vllm serve m --dtype half", "bf16") == [("activations-native", 1)]
    assert levels("vllm serve m --quantization awq_marlin")["note"] == 1
    kv_ships_fp8 = "weights=fp8,kv=fp8"
    assert violations("vllm serve m --kv-cache-dtype fp8", kv_ships_fp8) == []


def test_unit_file_quoting_continuations_and_environment_file(tmp_path: Path) -> None:
    unit = tmp_path / "vllm.service"
    unit.write_text(
        "[Unit]\nDescription=vLLM\n\n[Service]\n"
        'Environment="HF_HOME=/srv/hf" "VLLM_MARLIN_INPUT_DTYPE=fp8"\n'
        "EnvironmentFile=-/etc/default/vllm\n"
        "ExecStart=/opt/venv/bin/vllm serve moonshotai/Kimi-K2.5 \\\n"
        "    --tensor-parallel-size 8 \\\n"
        "    --kv-cache-dtype 'fp8_e4m3'\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    env = tmp_path / "vllm.env"
    env.write_text("# loaded by the unit\nVLLM_FLASHINFER_MOE_A2A_LOW_PRECISION_COMBINE=true\n")
    text = unit.read_text()
    result = lint_text(text, name=str(unit), env_files=[(str(env), env.read_text())])
    assert result.kind == "systemd"
    got = [(f.rule_id, f.file, f.line) for f in result.findings if f.level == "violation"]
    assert got == [
        ("activations-native", str(unit), 5),
        ("kv-cache-native", str(unit), 9),
        ("communication-native", str(env), 2),
    ]
    note = next(f for f in result.findings if "EnvironmentFile" in f.where)
    assert note.level == "note" and note.line == 6 and "/etc/default/vllm" in note.where


def test_shell_forms_docker_compose_and_variables() -> None:
    script = (
        "KV=fp8\n"
        "docker run --gpus all -e VLLM_MARLIN_INPUT_DTYPE=int8 vllm/vllm-openai:latest \\\n"
        '  --model m --kv-cache-dtype "$KV" && echo done\n'
    )
    assert violations(script) == [("activations-native", 2), ("kv-cache-native", 3)]
    compose = "services:\n  vllm:\n    environment:\n      - VLLM_TEST_FORCE_FP8_MARLIN=1\n"
    assert violations(compose) == [("weights-native", 4)]
    yaml_config = "model: m\nkv-cache-dtype: fp8\ntensor-parallel-size: 8\n"
    assert violations(yaml_config) == [("kv-cache-native", 2)]
    unresolved = lint_text("vllm serve m --kv-cache-dtype ${KV_DTYPE}")
    assert unresolved.count("review") == 1 and unresolved.compliant


def test_commented_out_settings_are_notes_not_violations() -> None:
    text = ("# VLLM_MARLIN_INPUT_DTYPE=fp8\nvllm serve m -tp 8 \\\n"
            "  --trust-remote-code  # --kv-cache-dtype fp8 was too lossy\n")  # fmt: skip
    result = lint_text(text)
    assert result.compliant
    notes = [(f.line, f.where) for f in result.findings if f.level == "note"]
    assert notes == [(1, "# VLLM_MARLIN_INPUT_DTYPE=fp8"),
                     (3, "# --kv-cache-dtype fp8 was too lossy")]  # fmt: skip


def run_lint(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", "lint", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_cli_exit_codes_and_output(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.sh", tmp_path / "bad.sh"
    good.write_text(REFERENCE_TP8)
    bad.write_text(COMMUNITY_RECIPE)
    ok = run_lint(str(good), "--native", "kimi-k2.5")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().endswith("[native: --native kimi-k2.5]")
    flagged = run_lint(str(bad))
    assert flagged.returncode == 1
    lines = flagged.stdout.strip().splitlines()
    assert lines[0].startswith(
        f"{bad}:3: violation activations-native VLLM_MARLIN_INPUT_DTYPE=fp8:"
    )
    assert "NOT COMPLIANT with full-precision v1.0.0: 3 violation(s)" in lines[-1]
    as_json = json.loads(run_lint(str(bad), "--json").stdout)
    assert as_json["compliant"] is False and as_json["counts"]["violation"] == 3
    assert {f["rule_id"] for f in as_json["findings"] if f["level"] == "violation"} == {
        "activations-native", "weights-native", "kv-cache-native"}  # fmt: skip
    review = tmp_path / "q.sh"
    review.write_text("vllm serve m --quantization fp8\n")
    assert run_lint(str(review)).returncode == 0
    assert run_lint(str(review), "--strict").returncode == 1


@pytest.mark.parametrize("case", ["missing", "directory", "binary", "usage", "policy", "config"])
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, case: str) -> None:
    target = tmp_path / "cmd.sh"
    target.write_text("vllm serve m\n")
    args = {
        "missing": [str(tmp_path / "nope.sh")],
        "directory": [str(tmp_path)],
        "binary": [str(tmp_path / "bin")],
        "usage": ["--no-such-flag"],
        "policy": [str(target), "--policy", str(tmp_path / "p.toml")],
        "config": [str(target), "--model-config", str(tmp_path / "config.json")],
    }[case]
    (tmp_path / "bin").write_bytes(b"\x7fELF\x00\x00")
    (tmp_path / "p.toml").write_text(
        'name = "p"\nversion = "2"\n[[rule]]\nid = "x"\nkind = "ban_fp8"\ncomponent = "weights"\n'
        'sentence = "S."\nrationale = "R."\n'
    )
    (tmp_path / "config.json").write_text('{"architectures": ["Foo"]}')
    proc = run_lint(*args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    if case != "usage":
        line = proc.stderr.strip()
        assert line.startswith("planner lint: ") and "\n" not in line
    if case == "policy":
        assert "rule 'x': unknown rule kind 'ban_fp8'" in proc.stderr
        assert str(tmp_path / "p.toml") in proc.stderr


def test_model_config_sets_native_precision(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(KIMI_CONFIG))
    cmd = tmp_path / "cmd.sh"
    cmd.write_text("vllm serve m --quantization fp8 --kv-cache-dtype auto\n")
    assert main([str(cmd), "--model-config", str(config)]) == 0  # fp8 is above int4 weights
    cmd.write_text("vllm serve m --kv-cache-dtype fp8\n")
    assert main([str(cmd), "--model-config", str(config)]) == 1


def test_nothing_in_the_file_is_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    script = tmp_path / "evil.sh"
    script.write_text(
        f"X=$(touch {marker})\n"
        f'vllm serve m --kv-cache-dtype "$(touch {marker})" `touch {marker}` ; touch {marker}\n'
        f"[Service]\nExecStartPre=/bin/touch {marker}\nEnvironmentFile={marker}.env\n"
    )
    (tmp_path / "pwned.env").unlink(missing_ok=True)
    proc = run_lint(str(script))
    assert proc.returncode in (0, 1), proc.stderr
    assert not marker.exists()


def test_arbitrary_text_never_raises() -> None:
    """Seeded garbage built from the syntax the parser cares about: a finding list, never
    an exception (the Policy page lints whatever is pasted)."""
    import random

    toks = ["vllm", "serve", "--kv-cache-dtype", "fp8", "=", '"', "'", "\\", "\n", "$", "${",
            "}", "#", ";", "&&", "|", "[Service]", "ExecStart=", "Environment=", "-e",
            "EnvironmentFile=", "VLLM_MARLIN_INPUT_DTYPE=", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=",
            "INT4", "FP", "--quantization", "--moe-a2a-backend", "deepep", " ", "\t", "export",
            "--deepep-dispatcher-output-dtype", "sglang.launch_server", "$(x)", "`", "--dtype",
            "half", "kv-cache-dtype:", "-q", "\r\n", "\x00", "é", "--", "${X:-fp8}", "X=fp8"]  # fmt: skip
    rng = random.Random(7)
    for _ in range(600):
        text = "".join(rng.choice(toks) for _ in range(rng.randint(0, 40)))
        for native in (None, parse_hint("deepseek-v3")):
            result = lint_text(text, native=native)
            assert result.lines() is not None and json.dumps(result.to_dict())


def test_linter_follows_the_policy_file(tmp_path: Path) -> None:
    """A policy without a KV-cache rule lets an FP8 KV cache through; its version is shown."""
    relaxed = tmp_path / "relaxed.toml"
    relaxed.write_text(
        'name = "no-quantized-comm"\nversion = "0.2.0"\n[[rule]]\nid = "comm"\n'
        'kind = "keep_native"\ncomponent = "communication"\nsentence = "No 8-bit collectives."\n'
        'rationale = "Only the wire is governed by this policy."\n'
    )
    cmd = tmp_path / "cmd.sh"
    cmd.write_text(COMMUNITY_RECIPE)
    proc = run_lint(str(cmd), "--policy", str(relaxed))
    assert proc.returncode == 0, proc.stdout
    assert "compliant with no-quantized-comm v0.2.0" in proc.stdout
    cmd.write_text("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT8\n")
    proc = run_lint(str(cmd), "--policy", str(relaxed))
    assert proc.returncode == 1 and f"{cmd}:1: violation comm " in proc.stdout


def test_sglang_load_time_quantization_flags() -> None:
    """SGLang server_args.py (sgl-project/sglang): --torchao-config int8dq|int8wo|int4wo-<g>|
    fp8wo|fp8dq-per_*, --modelopt-quant fp8|int4_awq|w4a8_awq|nvfp4|nvfp4_awq, and the
    flashinfer_mxfp4 MoE runner's --flashinfer-mxfp4-moe-precision (default quantizes inputs)."""
    launch = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 "
    assert violations(launch + "--torchao-config int4wo-128", "bf16") == [("weights-native", 1)]
    assert sorted(violations(launch + "--torchao-config fp8dq-per_row", "bf16")) == [
        ("activations-native", 1), ("weights-native", 1)]  # fmt: skip
    assert sorted(violations(launch + "--modelopt-quant w4a8_awq", "bf16")) == [
        ("activations-native", 1), ("weights-native", 1)]  # fmt: skip
    # An FP8 checkpoint keeps its FP8 weights: only the weights rule is decided by native.
    assert ("weights-native", 1) not in violations(launch + "--modelopt-quant fp8", "fp8-block")
    assert levels(launch + "--torchao-config int3wo")["review"] == 1
    mxfp4 = launch + "--moe-runner-backend flashinfer_mxfp4"
    assert violations(mxfp4, "bf16") == [("activations-native", 1)]
    assert violations(mxfp4 + " --flashinfer-mxfp4-moe-precision bf16", "bf16") == []
    commented = "# --torchao-config int8wo\n" + launch
    assert levels(commented, "bf16") == {"violation": 0, "review": 0, "note": 1}
