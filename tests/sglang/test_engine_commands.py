"""planner/tradeoff/engine_commands.py: the launch command of each engine parses back, with the
collectors' own layout parsers, to the layout the planner meant (no drift between them)."""

from __future__ import annotations

import shlex

import pytest

from collectors.serving.sglang import layout as sgl_layout
from collectors.serving.vllm import layout as vllm_layout
from planner.tradeoff import engine_commands as ec
from planner.tradeoff.layouts import default_layouts

CASES = [("tp", 8, 1, 1, ""), ("tp_ep_dp1", 8, 1, 8, ""), ("tp_attn_ep_moe", 8, 1, 8, ""),
         ("dp_attn_ep", 1, 8, 8, "allgather_reducescatter"),
         ("dp_attn_ep", 1, 8, 8, "deepep_low_latency"), ("tp_dp", 4, 2, 1, "")]  # fmt: skip
# The planner's tp_attn_ep_moe is SGLang's TP8+EP (TP attention, EP MoE at DP=1).
COLLECTOR_KIND = {"tp_attn_ep_moe": "tp_ep_dp1"}


@pytest.mark.parametrize(("kind", "tp", "dp", "ep", "a2a"), CASES)
def test_commands_parse_back_to_the_same_layout(kind, tp, dp, ep, a2a) -> None:
    cmds = ec.commands(kind, tp, dp, ep, "org/Model", a2a, host="gpu-1")
    assert cmds, kind
    for c in cmds:
        parse = sgl_layout.from_server_args if c.engine == "sglang" else vllm_layout.from_server_args
        lay = parse(c.launch)
        assert lay.kind == COLLECTOR_KIND.get(kind, kind) and lay.world_size == tp * dp
        assert lay.model == "org/Model"
        measure = shlex.split(c.measure)
        assert measure[:4] == ["python", "-m", "collectors", f"{c.engine}-bench"]
        server_args = measure[measure.index("--server-args") + 1]
        assert parse(server_args).kind == lay.kind  # what the bench run records as its layout
        assert "gpu-1" in c.measure and "--trace-dir" in c.profile


@pytest.mark.parametrize(("kind", "tp", "dp", "ep", "a2a"), CASES)
def test_a_launched_budget_rides_on_the_launch_and_bench_commands(kind, tp, dp, ep, a2a) -> None:
    """`python -m planner --token-budget N` predicts a server launched with that budget, so the
    commands it prints launch and benchmark that server, and still parse to the layout."""
    for c in ec.commands(kind, tp, dp, ep, "org/Model", a2a, token_budget=4096):
        parse = sgl_layout.from_server_args if c.engine == "sglang" else vllm_layout.from_server_args
        flag = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size"}[c.engine]
        launch = shlex.split(c.launch)
        assert launch[launch.index(flag) + 1] == "4096"
        measure = shlex.split(c.measure)
        server_args = shlex.split(measure[measure.index("--server-args") + 1])
        assert server_args[server_args.index(flag) + 1] == "4096"
        assert parse(c.launch).kind == COLLECTOR_KIND.get(kind, kind)
    assert all(" 4096" not in c.launch for c in ec.commands(kind, tp, dp, ep, "org/Model", a2a))


def test_pcie_ipc_allreduce_launch_sets_its_variable_and_parses_back() -> None:
    (c,) = ec.commands("tp_fast_allreduce", 8, 1, 1, "org/Model")
    assert c.launch.startswith("VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1 vllm serve org/Model")
    lay = vllm_layout.from_server_args(c.launch)
    assert (lay.kind, lay.world_size, lay.model) == ("tp", 8, "org/Model")


def test_sglang_only_layouts_and_full_precision_dispatch() -> None:
    assert ec.engines("tp_attn_ep_moe") == ["sglang"]
    assert ec.engines("tp_fast_allreduce") == ["vllm"]
    assert ec.engines("downcast") == []
    (c,) = ec.commands("tp_attn_ep_moe", 8, 1, 8)
    assert "--moe-a2a-backend deepep --deepep-dispatcher-output-dtype bf16" in c.launch
    from planner.policy.lint import lint_text

    assert lint_text(c.launch).count("violation") == 0  # BF16 dispatch keeps the policy


def test_tradeoff_lines_name_the_sglang_only_layout() -> None:
    from planner.specs.hardware import HARDWARE_PRESETS
    from planner.specs.hardware import preset as hw_preset
    from planner.specs.models import MODEL_PRESETS, preset

    moe = next(preset(n) for n in MODEL_PRESETS if preset(n).num_experts > 0)
    hw = hw_preset(next(iter(HARDWARE_PRESETS)))
    lines = ec.sglang_only_lines(default_layouts(moe, hw), "org/Model")
    assert len(lines) == 1 and lines[0].startswith("**TP attention + EP MoE")
    assert "python -m collectors sglang-bench --url http://HOST:30000" in lines[0]
