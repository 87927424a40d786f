"""Honest recommendations: every prediction with its measured-error band, unmeasured
collectives as hypotheses (never the headline), and close calls said as such."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.api import plan
from planner.cost.bands import band, weight_format
from planner.cost.comm import CommCurve
from planner.cost.params import BANDS
from planner.specs import hardware, models
from planner.tradeoff.recommend import call_at
from planner.tradeoff.report_json import to_json
from tests.planner.test_cli import planner


def test_bands_come_from_the_recorded_residuals_per_engine_and_format() -> None:
    kimi, ds = models.preset("kimi-k2.5"), models.preset("deepseek-v3")
    assert (weight_format(kimi), weight_format(ds)) == ("int4", "fp8")
    b = band("vllm", ds)
    assert b.key == "vllm/fp8" and b.q10 == BANDS["vllm/fp8"]["tpot"]["q10"]
    assert band("sglang", kimi).key == "sglang/*"  # no SGLang INT4 rows: the engine's band
    assert band("vllm", ds, "ttft").q90 == BANDS["vllm/fp8"]["ttft"]["q90"]
    pred = np.array([10.0])
    assert b.low(pred)[0] == pytest.approx(10 / (1 + b.q90))
    assert b.high(pred)[0] == pytest.approx(10 / (1 + b.q10))


def test_every_layout_carries_its_band() -> None:
    res = plan(models.preset("minimax-m2.5"), hardware.preset("h200-sxm-8x"))
    for r in res.layouts:
        tb = band(r.curve.engine, res.model)
        ok = r.curve.fits
        assert np.allclose(r.curve.low_ms[ok], tb.low(r.curve.tpot_ms[ok]))
        assert np.allclose(r.curve.high_ms[ok], tb.high(r.curve.tpot_ms[ok]))
        assert np.all(r.curve.ttft_low_ms[ok] < r.curve.ttft_high_ms[ok])


def test_close_calls_are_said_and_clear_wins_are_not() -> None:
    res = plan(models.preset("kimi-k2.5"), hardware.preset("h200-sxm-8x"))
    close = call_at(res, 1)
    assert close.layout == "TP=8" and "TP=8 + EP (DP=1)" in close.too_close
    tp, tpep = res.layout("tp").curve, res.layout("tp_ep_dp1").curve
    j = tp.at(1)
    assert tpep.low_ms[j] <= tp.high_ms[j]  # bands overlap: why it is close
    data = to_json(res, [1])
    rec = data["recommended"][0]
    assert rec["too_close_to_call"] and set(rec["commands"]) == {"TP=8", *rec["too_close_to_call"]}
    assert any("vllm-bench" in c["measure"] for c in rec["commands"]["TP=8 + EP (DP=1)"])
    # DP=8 attention at concurrency 1 is far slower than TP=8: never "too close" there
    assert "DP=8 attention + EP=8 (AllGather+ReduceScatter)" not in close.too_close


def test_cli_text_says_too_close_to_call_with_both_commands() -> None:
    p = planner("--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--report", "1")
    assert p.returncode == 0, p.stderr
    assert "c=1: TP=8" in p.stdout and "too close to call with TP=8 + EP (DP=1)" in p.stdout
    assert '--server-args "-tp 8"' in p.stdout
    assert '--server-args "-tp 8 --enable-expert-parallel"' in p.stdout
    assert "HYPOTHESIS" in p.stdout and "python -m collectors comm --ops all_to_all" in p.stdout


def test_a_measured_all_to_all_turns_the_hypothesis_into_a_candidate() -> None:
    m, hw = models.preset("kimi-k2.5"), hardware.preset("h200-sxm-8x")
    before = plan(m, hw)
    est = before.layout("tp_attn_ep_moe")
    assert est.hypothesis and est.unmeasured[0].op == "all_to_all"
    assert est.unmeasured[0].kind == "spec"
    a2a = CommCurve("all_to_all", 8, (14336.0, 16 * 14336.0), (15.0, 40.0), "measured",
                    "measured comm run c7 (nccl, cuda)", gpu_model="NVIDIA H200")  # fmt: skip
    after = plan(m, hw, comm_curves=[a2a])
    est = after.layout("tp_attn_ep_moe")
    assert not est.hypothesis and est.recommendable
    assert est.collectives[-1].source == "measured comm run c7 (nccl, cuda)"


def test_preset_headline_is_not_the_unmeasured_fast_allreduce() -> None:
    p = planner("--preset", "reference-kimi-k25-rtxpro6000", "--json")
    data = json.loads(p.stdout)
    assert data["headline"]["layout"] == "TP=8"
    assert "TP=8 + FlashInfer PCIe-IPC AllReduce" in data["hypotheses"]
    fast = next(x for x in data["layouts"] if x["kind"] == "tp_fast_allreduce")
    assert fast["hypothesis"] and fast["unmeasured"][0]["kind"] == "derived"
    assert fast["measure_commands"][0].startswith("python -m collectors comm --ops all_reduce")
