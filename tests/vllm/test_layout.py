"""Layouts from `vllm serve` command lines, /server_info and trace names; profiler advice."""

from __future__ import annotations

import pytest

from collectors.serving.vllm import layout


@pytest.mark.parametrize(("args", "name", "kind", "world"), [
    ("vllm serve moonshotai/Kimi-K2.5 -tp 8", "TP8", "tp", 8),
    ("vllm serve m --tensor-parallel-size=8 --enable-expert-parallel", "TP8+EP", "tp_ep_dp1", 8),
    ("vllm serve m -tp 1 -dp 8 --enable-expert-parallel", "TP1xDP8+EP", "dp_attn_ep", 8),
    ("vllm serve m -tp 4 -dp 2", "TP4xDP2", "tp_dp", 8),
    ("vllm serve m -tp 4 -pp 2", "TP4xPP2", "tp", 8),
])  # fmt: skip
def test_server_args(args, name, kind, world) -> None:
    lay = layout.from_server_args(args)
    assert (lay.name, lay.kind, lay.world_size, lay.model) == (
        name,
        kind,
        world,
        "m" if " m " in args else lay.model,
    )


def test_server_args_extras_and_errors() -> None:
    lay = layout.from_server_args("--model x/y -tp 2 --kv-cache-dtype fp8 --all2all-backend "
                                  "deepep_low_latency")  # fmt: skip
    assert (lay.model, lay.kv_cache_dtype, lay.all2all_backend) == (
        "x/y", "fp8", "deepep_low_latency")  # fmt: skip
    with pytest.raises(ValueError, match="-tp 'eight' is not a number"):
        layout.from_server_args("-tp eight")


def test_server_info_and_trace_names() -> None:
    info = {"vllm_config": {"parallel_config": {"tensor_parallel_size": 2,
            "pipeline_parallel_size": 1, "data_parallel_size": 4,
            "enable_expert_parallel": True}, "cache_config": {"cache_dtype": "auto"}}}  # fmt: skip
    lay = layout.from_server_info(info)
    assert (lay.name, lay.kind, lay.source) == ("TP2xDP4+EP", "tp_dp", "server_info")
    assert layout.from_server_info({"vllm_config": "text form"}) is None
    names = [f"dp{d}_pp0_tp{t}_dcp0_ep{d * 2 + t}_rank{t}.1.pt.trace.json.gz"
             for d in range(2) for t in range(2)]  # fmt: skip
    lay = layout.from_trace_names(names)
    assert (lay.tp, lay.dp, lay.world_size) == (2, 2, 4)
    assert layout.from_trace_names(["host_123.1.pt.trace.json.gz"]) is None


@pytest.mark.parametrize(("version", "has_config", "has_env"), [
    ("0.11.2", False, True), ("0.13.0", True, True), ("0.16.0rc1", True, False),
    (None, True, True),
])  # fmt: skip
def test_profiler_hint_per_version(version, has_config, has_env) -> None:
    hint = layout.profiler_hint(version, "/var/traces")
    assert ("--profiler-config '{\"profiler\":\"torch\",\"torch_profiler_dir\":\"/var/traces\",\"ignore_frontend\":true}'"
            in hint) == has_config  # fmt: skip
    assert ("VLLM_TORCH_PROFILER_DIR=/var/traces vllm serve" in hint) == has_env


def test_redact_hides_keys_and_tokens() -> None:
    text = "vllm serve m -tp 8 --api-key abc123 --hf-token=hf_xyz --tokenizer t/k --port 8000"
    red = layout.redact(text)
    assert "abc123" not in red and "hf_xyz" not in red
    assert "-tp 8" in red and "--port 8000" in red and "--api-key REDACTED" in red
    assert "--tokenizer t/k" in red
    assert layout.from_server_args(red).tp == 8
