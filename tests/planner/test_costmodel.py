"""Decode-step cost model: properties that must hold whatever the constants."""

from __future__ import annotations

import numpy as np
import pytest

from planner import hardware, models
from planner.api import plan
from planner.costmodel import Assumptions, Calibration, expected_max_binomial
from planner.layouts import KINDS, default_layouts


@pytest.fixture(scope="module")
def kimi_h200():
    return plan(models.preset("kimi-k2.5"), hardware.preset("h200-sxm-8x"))


def test_expected_max_binomial_matches_simulation() -> None:
    rng = np.random.default_rng(7)
    p = np.array([0.0, 0.02, 0.3, 1.0])
    exact = expected_max_binomial(48, p, 8)
    sims = [rng.binomial(48, q, size=(100_000, 8)).max(axis=1).mean() for q in p]
    assert exact == pytest.approx(sims, abs=0.03)
    assert exact[0] == 0 and exact[-1] == 48
    assert expected_max_binomial(48, np.array([0.3]), 1)[0] == pytest.approx(48 * 0.3)


def test_tpot_rises_and_throughput_grows_with_concurrency(kimi_h200) -> None:
    for r in kimi_h200.layouts:
        assert np.all(np.diff(r.curve.tpot_ms) >= -1e-9), r.layout.name
        assert np.all(r.curve.tpot_ms > 0)
    tp = kimi_h200.layout("tp").curve
    assert tp.tokens_per_s[tp.at(64)] > 10 * tp.tokens_per_s[tp.at(1)]


def test_expert_reads_saturate_at_all_experts() -> None:
    res = plan(models.preset("kimi-k2.5"), hardware.preset("h200-sxm-8x"),
               concurrencies=[1, 8, 1024, 4096])  # fmt: skip
    m = res.model
    tp = res.layout("tp").curve
    bw = res.hardware.mem_bandwidth_gbps * 1e9 * Assumptions().bandwidth_efficiency
    all_experts_ms = m.routed_expert_bytes() / 8 / bw * 1e3
    assert tp.terms["weights"][2] > all_experts_ms  # every expert read once, plus the rest
    assert tp.terms["weights"][2] < all_experts_ms * 1.5
    # At 4096 tokens the GEMMs are FLOP-bound: the roofline takes over from bytes.
    assert tp.terms["weights"][3] > 1.5 * tp.terms["weights"][2]


def test_vllm_facts(kimi_h200) -> None:
    tp, tpep = kimi_h200.layout("tp").curve, kimi_h200.layout("tp_ep_dp1").curve
    # TP + EP with DP=1 removes no AllReduce (REFERENCE §2): 61 x 2 + 1 calls, same time.
    assert tp.allreduce_calls == tpep.allreduce_calls == 123
    assert np.allclose(tp.terms["allreduce"], tpep.terms["allreduce"])
    assert np.all(tpep.terms["all_to_all"] == 0)
    dp = kimi_h200.layout("dp_attn_ep")
    m = kimi_h200.model
    # Attention-DP replicates every non-expert weight on each GPU.
    assert dp.curve.weights_per_gpu_bytes == pytest.approx(
        m.nonexpert_bytes() + m.routed_expert_bytes() / 8)  # fmt: skip
    assert np.all(dp.curve.terms["allreduce"] == 0)
    # Idle DP ranks run dummy passes: up to 8 requests cost the same step.
    assert np.allclose(dp.curve.tpot_ms[:8], dp.curve.tpot_ms[0])
    assert list(dp.curve.dummy_ranks[:3]) == [7, 6, 5] and dp.curve.dummy_ranks[8] == 0


def test_memory_fit_and_fp8_kv(kimi_h200) -> None:
    tp = kimi_h200.layout("tp").curve
    fp8 = kimi_h200.layout("TP=8 + FP8 KV cache").curve
    assert fp8.kv_capacity_tokens == pytest.approx(2 * tp.kv_capacity_tokens)
    assert fp8.fits.sum() >= tp.fits.sum()
    longer = plan(kimi_h200.model, kimi_h200.hardware, assumptions=Assumptions(
        context_tokens=32768))  # fmt: skip
    assert longer.layout("tp").curve.fits.sum() < tp.fits.sum()


def test_calibration_reproduces_the_measured_step() -> None:
    cal = Calibration("tp", 8, 1, 4, step_ms=30.0, comm_ms=(("allreduce", 12.0),),
                      source="measured trace run t1")  # fmt: skip
    res = plan(models.preset("deepseek-v3"), hardware.preset("h100-sxm-8x"), calibration=cal)
    tp = res.layout("tp")
    i = tp.curve.at(4)
    assert tp.calibrated.tpot_ms[i] == pytest.approx(30.0)
    assert tp.calibrated.terms["allreduce"][i] == pytest.approx(12.0)
    assert tp.curve.tpot_ms[i] != pytest.approx(30.0)  # uncalibrated kept alongside
    assert all(r.calibrated is not None for r in res.layouts)
    assert any(a.what == "calibration" and a.source == "measured trace run t1"
               for a in res.assumptions)  # fmt: skip


def test_every_kind_is_offered() -> None:
    lays = default_layouts(models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x"))
    assert {lay.kind for lay in lays} == set(KINDS)
    assert {(lay.tp, lay.dp, lay.ep) for lay in lays if lay.kind == "dp_attn_ep"} == {(1, 8, 8)}
