"""Layouts against the precision policy: downcasts are blocked, never recommended."""

from __future__ import annotations

import pytest

from planner.api import plan
from planner.errors import PlannerInputError
from planner.policy.check import check_precision, load_policy
from planner.specs import hardware, models
from planner.tradeoff.layouts import default_layouts, select
from planner.tradeoff.recommend import call_at
from planner.tradeoff.report_json import to_json


@pytest.mark.parametrize("name", ["kimi-k2.5", "deepseek-v3", "minimax-m2.5"])
def test_only_downcasts_violate(name: str) -> None:
    m = models.preset(name)
    pol = load_policy()
    for lay in default_layouts(m, hardware.preset("rtx-pro-6000-pcie-8x")):
        v = check_precision(m.native, lay.precision(m), pol)
        assert bool(v) == (lay.kind == "downcast"), (lay.name, v)


def test_violated_rules_per_downcast() -> None:
    res = plan(models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x"))
    rules = {r.layout.name: {v.rule_id for v in r.violations} for r in res.layouts}
    assert rules["TP=8 + FP8 KV cache"] == {"kv-cache-native"}
    assert rules["TP=8 + W4A8 Marlin"] == {"activations-native"}
    assert rules["TP attention + EP MoE, FP8 dispatch/combine"] == {
        "communication-native", "dispatch-native"}  # fmt: skip
    # DeepSeek-V3 dispatches FP8 natively: only the FP8 combine is a downcast there.
    ds = plan(models.preset("deepseek-v3"), hardware.preset("h200-sxm-8x"))
    lay = ds.layout("TP attention + EP MoE, FP8 dispatch/combine")
    assert {v.rule_id for v in lay.violations} == {"communication-native"}
    assert "TP=8 + W4A8 Marlin" not in {r.layout.name for r in ds.layouts}  # not W4A16


@pytest.mark.parametrize("host", ["rtx-pro-6000-pcie-8x", "h100-sxm-8x", "h200-sxm-8x"])
def test_never_recommends_a_violating_layout(host: str) -> None:
    res = plan(models.preset("minimax-m2.5"), hardware.preset(host))
    blocked = {r.layout.name for r in res.layouts if not r.compliant}
    assert blocked
    assert not blocked & {x.layout for x in res.recommended}
    assert not blocked & {x["layout"] for x in to_json(res)["recommended"]}
    for c in range(1, 513, 7):
        assert call_at(res, c).layout not in blocked


def test_policy_cost_sentence() -> None:
    res = plan(models.preset("minimax-m2.5"), hardware.preset("rtx-pro-6000-pcie-8x"))
    assert res.policy_costs, "an FP8 downcast should win somewhere"
    cost = res.policy_costs[-1]
    assert cost.cost_ms > 0 and cost.sentence().startswith("the policy costs ")
    blocked = res.layout(cost.blocked_layout)
    assert not blocked.compliant


def test_select_by_kind_and_name() -> None:
    lays = default_layouts(models.preset("kimi-k2.5"), hardware.preset("h100-sxm-8x"))
    assert [x.kind for x in select(lays, ["tp"])] == ["tp"]
    assert len(select(lays, ["dp_attn_ep"])) == 2
    with pytest.raises(PlannerInputError, match="layout 'tp9' unknown"):
        select(lays, ["tp9"])


def test_a_faster_allreduce_is_offered_only_where_tp_runs_nccl() -> None:
    # Full NVLink: vLLM's TP already runs its custom AllReduce, so a "fast AllReduce" layout
    # would promise a saving the default has taken. PCIe-only: TP runs NCCL, and FlashInfer's
    # PCIe-IPC AllReduce is the launchable alternative, with the variable that turns it on.
    kimi = models.preset("kimi-k2.5")
    for host in ("h100-sxm-8x", "h200-sxm-8x", "b200-sxm-8x"):
        lays = default_layouts(kimi, hardware.preset(host))
        assert "tp_fast_allreduce" not in {x.kind for x in lays}
        with pytest.raises(PlannerInputError, match="for PCIe-only hosts"):
            select(lays, ["tp_fast_allreduce"])
    (fast,) = select(default_layouts(kimi, hardware.preset("rtx-pro-6000-pcie-8x")),
                     ["tp_fast_allreduce"])  # fmt: skip
    assert fast.name == "TP=8 + FlashInfer PCIe-IPC AllReduce"
    assert fast.how.startswith("VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1 vllm serve")
