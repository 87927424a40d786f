"""The plan's layouts through the serving model: properties that hold whatever the fitted
constants are (expert-load statistics, monotone curves, vLLM memory facts, calibration)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.api import plan
from planner.cost.calibrate import Measured
from planner.cost.params import FITTED
from planner.cost.routing import expected_max_binomial
from planner.cost.types import ServeLayout
from planner.specs import hardware, models
from planner.tradeoff.layouts import KINDS, default_layouts


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
        cur = r.curve
        if cur.why_not:
            assert "does not fit" in cur.why_not and not cur.fits.any()
            continue
        ok = cur.fits
        assert np.all(np.diff(cur.tpot_ms[ok]) >= -1e-9), r.layout.name
        assert np.all(cur.tpot_ms[ok] > 0) and np.all(cur.ttft_ms[ok] > 0)
        assert np.all(cur.low_ms <= cur.high_ms)
    tp = kimi_h200.layout("tp").curve
    assert tp.tokens_per_s[tp.at(64)] > 10 * tp.tokens_per_s[tp.at(1)]


def test_expert_reads_saturate_at_all_experts() -> None:
    m, hw = models.preset("minimax-m2.5"), hardware.preset("h200-sxm-8x")
    res = plan(m, hw, concurrencies=[1, 8, 512, 1024], isl=1, osl=64)
    tp = res.layout("tp").curve
    bw = hw.mem_bandwidth_gbps * 1e9 * FITTED.bw_eff
    all_experts_ms = m.routed_expert_bytes() / 8 / bw * 1e3
    ex = tp.terms["experts"] + tp.terms["expert_imbalance"]
    assert ex[0] < 0.5 * all_experts_ms  # one token touches top-k of 256 experts (+ floors)
    assert ex[2] > all_experts_ms  # 512 tokens touch every expert: each read once (+ floors)
    assert ex[3] == pytest.approx(ex[2], rel=0.05)  # ... and twice the tokens read no more


def test_vllm_facts(kimi_h200) -> None:
    tp, tpep = kimi_h200.layout("tp").curve, kimi_h200.layout("tp_ep_dp1").curve
    # TP + EP with DP=1 removes no AllReduce (REFERENCE §2): 61 x 2 + 1 calls, same time.
    assert tp.allreduce_calls == tpep.allreduce_calls == 123
    assert np.allclose(tp.terms["allreduce"], tpep.terms["allreduce"])
    assert np.all(tpep.terms["all_to_all"] == 0)
    # ... but EP puts a busiest rank's extra experts on the step
    assert np.all(tpep.terms["expert_imbalance"][:64] > 0)
    assert np.all(tp.terms["expert_imbalance"] == 0)
    dp = kimi_h200.layout("dp_attn_ep")
    m = kimi_h200.model
    # Attention-DP replicates every non-expert weight on each GPU.
    assert dp.curve.weights_per_gpu_bytes == pytest.approx(
        m.nonexpert_bytes() + m.routed_expert_bytes() / 8)  # fmt: skip
    assert np.all(dp.curve.terms["allreduce"] == 0)
    assert np.all(dp.curve.terms["all_to_all"] > 0)  # AllGather + ReduceScatter per MoE layer
    # Idle DP ranks run dummy passes: up to 8 requests cost the same decode step; only the
    # experts of the busy ranks' prompt tokens grow with them.
    decode = dp.curve.tpot_ms - dp.curve.terms["prefill"]
    assert np.allclose(decode[:8], decode[0], rtol=5e-3)  # (each point's own context)
    assert np.all(np.diff(dp.curve.terms["prefill"][:8]) > 0)
    assert list(dp.curve.dummy_ranks[:3]) == [7, 6, 5] and dp.curve.dummy_ranks[8] == 0


def test_fp8_kv_doubles_what_the_cache_admits(kimi_h200) -> None:
    tp = kimi_h200.layout("tp").curve
    fp8 = kimi_h200.layout("TP=8 + FP8 KV cache").curve
    assert fp8.kv_capacity_seqs == pytest.approx(2 * tp.kv_capacity_seqs, rel=0.01)
    assert fp8.fits.sum() >= tp.fits.sum()
    longer = plan(kimi_h200.model, kimi_h200.hardware, isl=32768, osl=1024)
    assert longer.layout("tp").curve.fits.sum() < tp.fits.sum()


def test_a_measured_sweep_gives_the_calibrated_view_beside_the_model() -> None:
    """A TP=8 sweep 25% slower than the model: the calibrated TP=8 follows it, the model's
    view is kept, every layout has a calibrated curve, and every printed point of either
    view lies inside its band."""
    m, hw = models.preset("deepseek-v3"), hardware.preset("b200-sxm-8x")
    base = plan(m, hw, concurrencies=[1, 2, 4, 8, 16, 32], isl=1024, osl=256).layout("tp").curve
    measured = [Measured(ServeLayout(8, moe_tp=8), 1024, 256, int(c), float(t) * 1.25)
                for c, t in zip(base.concurrency, base.tpot_ms, strict=True)]  # fmt: skip
    res = plan(m, hw, concurrencies=range(1, 65), isl=1024, osl=256, measured=measured)
    tp = res.layout("tp")
    for c in (1, 8, 32):
        i = tp.curve.at(c)
        assert tp.calibrated.tpot_ms[i] == pytest.approx(1.25 * tp.curve.tpot_ms[i], rel=0.08)
    assert res.calibration.applied and res.calibration.check.kind == "concurrencies"
    assert all(r.calibrated is not None for r in res.layouts)
    for r in res.layouts:
        for cur in (r.curve, r.calibrated):
            ok = np.isfinite(cur.tpot_ms)
            assert (cur.low_ms[ok] <= cur.tpot_ms[ok]).all()
            assert (cur.tpot_ms[ok] <= cur.high_ms[ok]).all()
    assert any(a.what == "calibration" and "calibrated on 6 points of TP=8" in a.value
               for a in res.assumptions)  # fmt: skip


@pytest.mark.parametrize("scale", [1.25, 1.0])
def test_a_pick_the_host_never_measured_is_flagged(scale: float) -> None:
    """A measured TP=8 sweep 25% slower than the model on a host like the fit's raises only
    TP=8 (its level does not carry), so the calibrated view may recommend a layout nobody
    measured: a finding says which, where, and to measure it. A sweep the model already
    predicts changes no pick and says nothing."""
    m, hw = models.preset("kimi-k2.5"), hardware.preset("h200-sxm-8x")
    base = plan(m, hw, concurrencies=[1, 2, 4, 8, 16, 32], isl=1024, osl=256).layout("tp").curve
    measured = [Measured(ServeLayout(8, moe_tp=8), 1024, 256, int(c), float(t) * scale)
                for c, t in zip(base.concurrency, base.tpot_ms, strict=True)]  # fmt: skip
    res = plan(m, hw, concurrencies=range(1, 65), isl=1024, osl=256, measured=measured)
    assert res.calibration.applied == (scale > 1) and not res.calibration.carries
    flips = [f for f in res.findings if f.startswith("Calibrated view, concurrency")]
    moved = [(r.start, r.end, r.layout) for r in res.recommended_calibrated
             if r.layout != "TP=8" and any(f.layout == "TP=8" and f.start <= r.end
                                           and r.start <= f.end for f in res.recommended)]
    assert len(flips) == len(moved) == (1 if scale > 1 else 0)
    if flips:
        start, _, pick = moved[0]
        assert flips[0].startswith(f"Calibrated view, concurrency {start}-")
        assert f": {pick} (not measured" in flips[0] and f"measure {pick} before" in flips[0]
        assert "your measured TP=8, which ran +2" in flips[0]


def test_every_kind_is_offered() -> None:
    lays = default_layouts(models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x"))
    assert {lay.kind for lay in lays} == set(KINDS)
    assert {(lay.tp, lay.dp, lay.ep) for lay in lays if lay.kind == "dp_attn_ep"} == {(1, 8, 8)}
