"""The fit on the Blackwell fixture: filter rules, recorded constants, leave-one-model-out."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fitting import fit, fixture, holdout
from fitting.fixture_mtp import sweep_of
from planner.cost import serving
from planner.cost.params import FITTED

pytestmark = pytest.mark.skipif(not fixture.CSV.is_file(), reason=f"{fixture.CSV} absent")


@pytest.fixture(scope="module")
def rows():
    return fixture.load_rows()


def test_filter_rules_remove_the_known_defects(rows) -> None:
    kept, dropped = rows
    assert dropped["exact repeats"] > 0
    # rule 4: no row of a run that swept only MTP configs; of the DeepSeek-R1 FP8 SGLang run
    # that swept both, the non-MTP config's points only, one run each (the slower one)
    assert dropped["runs of InferenceX MTP configs"] > 100
    mixed = [r for r in kept if sweep_of(r)]
    assert mixed and all(sweep_of(r).stp and sweep_of(r).stp_swept(r) for r in mixed)
    # ... nor the undated copies of the Qwen3.5 MTP run (TP=4 EP=1, a layout only it swept)
    assert not [r for r in kept if "Qwen3.5" in r.model_path and r.system == "b200_sxm"
                and r.quant.startswith("fp8") and (r.layout.tp, r.layout.moe_ep) == (4, 1)]  # fmt: skip
    points = [(r.isl, r.osl, r.layout, r.concurrency) for r in mixed]
    assert len(set(points)) == len(points)
    assert min(r.tpot_ms for r in mixed if r.layout.tp == 8 and r.concurrency == 4
               and r.isl == r.osl) > 8.0  # the non-MTP run (MTP: 6.70 ms)  # fmt: skip
    vllm = [r for r in kept if r.engine == "vllm"]
    # rule 2: no vLLM row is left as attention-DP with moe_ep = tp x dp
    assert not [r for r in vllm if r.layout.dp > 1]
    assert [r for r in vllm if r.layout.moe_ep > 1 and "cfg" in r.id]  # re-read as TP+EP
    keys = [r.key for r in kept]
    for key in {k for k in keys if keys.count(k) > 1}:
        vals = [r.tpot_ms for r in kept if r.key == key]
        assert max(vals) < 2 * min(vals)  # rule 5
    # rule 3: the gap-analysis file's copies rounded to 0.01 ms are gone, dated runs kept
    assert dropped["copies rounded to 0.01 ms"] > 0
    gap = [r for r in kept if "gap_analysis" in r.id]
    assert not [r for r in gap if any(o is not r and o.key == r.key and abs(o.tpot_ms - r.tpot_ms)
                                      <= 0.005 and abs(o.ttft_ms - r.ttft_ms) <= 0.005
                                      for o in kept)]  # fmt: skip
    ds_trt = [r for r in kept if r.engine == "trtllm" and "DeepSeek-R1" in r.model_path]
    assert len({r.key for r in ds_trt}) == len(ds_trt)  # rule 4: one run per point


def test_refit_reproduces_the_recorded_constants(rows) -> None:
    """Fails when the model or the data changes the fit: re-run `python -m fitting --write` and
    commit the new planner/cost/fitted.json (with the new accuracy figures)."""
    p = fit.fit_all(rows[0])
    for spec in fit.FREE:  # "name" or "name:engine" (one engine's value)
        assert fit._get(p, spec) == pytest.approx(fit._get(FITTED, spec), rel=0.02), spec
    for engine, path in FITTED.ttft_fixed_ms.items():  # each engine's request path
        assert p.ttft_fixed_ms[engine] == pytest.approx(path, rel=0.02), engine


def test_leave_one_model_out_on_vllm(rows) -> None:
    """Each vLLM model predicted by a fit that never saw it (the figure BANDS records)."""
    errs = fit.lomo([r for r in rows[0] if r.engine == "vllm"], iters=120)
    s = holdout.summary(errs)
    assert s["rows"] >= 500
    assert s["median_abs_tpot_err"] <= 0.12 and s["within_25pct"] >= 0.8
    assert s["median_abs_ttft_err"] <= 0.30
    band = holdout.bands(errs)["vllm/*"]["tpot"]
    assert band["q10"] < 0 < band["q90"]


def test_the_recorded_values_are_a_minimum_of_the_fit_loss(rows) -> None:
    """Each engine's request path is the best constant for the recorded GPU parameters, and
    moving any fitted value by 10% either way does not lower the fit's loss."""
    gs = fit.groups(rows[0])
    paths, at = fit.request_paths(gs, FITTED)
    for engine, value in paths.items():
        assert value == pytest.approx(FITTED.ttft_fixed_ms[engine], abs=1.0), engine
    for spec in fit.FREE:
        x = np.log([fit._get(FITTED, n) for n in fit.FREE])
        for step in (np.log(0.9), np.log(1.1)):
            moved = x.copy()
            moved[fit.FREE.index(spec)] += step
            assert fit.loss(gs, fit._params(moved, FITTED, fit.FREE)) >= at - 1e-4, spec


def test_fitted_model_is_unbiased_per_engine(rows) -> None:
    errs = fit.errors(fit.groups(rows[0]), FITTED)
    for engine in ("vllm", "sglang", "trtllm"):
        e = np.array([x[1] for x in errs if x[0].engine == engine])
        assert e.size > 100 and abs(float(np.median(e))) < 0.15, engine


def test_rows_with_a_shipped_checkpoint_run_it_as_shipped(rows) -> None:
    # The FP8 Llama rows are ModelOpt's nvidia/Llama-3.1-70B-Instruct-FP8: its FP8 KV cache
    # (kv_cache_quant_algo) is what every engine runs by default, and what their KV admits.
    llama = next(r for r in rows[0] if "Llama-3.1-70B" in r.model_path and r.quant == "fp8")
    assert fixture.model_for(llama).native.kv_cache == "fp8_e4m3"
    deepseek = next(r for r in rows[0] if "DeepSeek-V3" in r.model_path and r.quant == "fp8_block")
    assert fixture.model_for(deepseek).native.kv_cache == "bf16"  # DeepSeek's own FP8 ships none



def test_trtllm_attention_dp_rows_ran_with_the_balance_their_scripts_set(rows) -> None:
    """InferenceX's TRT-LLM scripts turn attention_dp_config.enable_balance on under DP
    attention (DeepSeek-R1: timeout_iters 60; gpt-oss: TRT-LLM's default 50). Without the
    wait those rows' TTFT is under-predicted by about half; with it, about evenly."""
    adp = [r for r in rows[0] if r.engine == "trtllm" and r.layout.dp > 1]
    assert len(adp) >= 15
    assert {fixture.workload_for(r).adp_balance_iters for r in adp} == {50, 60}
    assert not [r for r in rows[0] if fixture.workload_for(r).adp_balance_iters
                and (r.layout.dp == 1 or r.engine != "trtllm")]  # fmt: skip
    on, off = [], []
    for g in fit.groups(adp):
        w = fixture.workload_for(g.rows[0])
        for balance, out in ((w.adp_balance_iters, on), (0, off)):
            pr = serving.predict(g.model, g.host, g.rows[0].layout,
                                 dataclasses.replace(w, adp_balance_iters=balance), g.conc)  # fmt: skip
            out += list(pr.ttft_ms / g.ttft - 1)
    assert np.median(off) < -0.4 and abs(np.median(on)) < 0.15


def test_sglang_rows_ran_with_the_recv_interval_their_scripts_set(rows) -> None:
    """InferenceX's SGLang scripts poll for new requests every 10 or 30 decode steps
    (--scheduler-recv-interval). Without that wait the rows' TTFT is under-predicted by about
    a fifth; with it, the median is close and the typical error smaller."""
    sg = [r for r in rows[0] if r.engine == "sglang"]
    assert {fixture.workload_for(r).recv_interval for r in sg} == {1, 10, 30}
    on, off = [], []
    groups = [g for g in fit.groups(sg) if g.workload.recv_interval > 1]
    for g, pr in zip(groups, fit.predict_groups(groups, FITTED), strict=True):
        if pr is None:
            continue  # does not fit at the engine's default memory rule (counted apart)
        w = dataclasses.replace(g.workload, recv_interval=1)
        on += list(pr.ttft_ms / g.ttft - 1)
        off += list(serving.predict(g.model, g.host, g.rows[0].layout, w, g.conc).ttft_ms
                    / g.ttft - 1)  # fmt: skip
    assert len(on) >= 200
    assert np.median(off) < -0.15 and abs(np.median(on)) < 0.1
    assert np.median(np.abs(on)) < np.median(np.abs(off)) - 0.05


def test_trtllm_rows_ran_with_the_batch_waiting_their_scripts_set(rows) -> None:
    """InferenceX's Llama-3.1-70B 1k/1k scripts below TP=8 and DeepSeek-R1 FP8's 1k/1k from
    C = 64 (2026-01-29) held prompts up to 20 / 40 decode steps (batch_wait_timeout_iters).
    Without that hold those rows' TTFT is under-predicted by half; with it the median is
    close."""
    trt = [r for r in rows[0] if r.engine == "trtllm"]
    groups = [g for g in fit.groups(trt) if g.workload.batch_wait_iters]
    assert {g.workload.batch_wait_iters for g in groups} == {20, 40}
    on, off = [], []
    for g, pr in zip(groups, fit.predict_groups(groups, FITTED), strict=True):
        w = dataclasses.replace(g.workload, batch_wait_iters=0, batch_wait_ratio=0.0)
        on += list(pr.ttft_ms / g.ttft - 1)
        off += list(serving.predict(g.model, g.host, g.rows[0].layout, w, g.conc).ttft_ms
                    / g.ttft - 1)  # fmt: skip
    assert len(on) >= 30
    assert np.median(off) < -0.4 and abs(np.median(on)) < 0.25


def test_vllm_rows_ran_with_the_kv_dtype_and_budget_their_scripts_set(rows) -> None:
    """InferenceX's vLLM scripts ran FP8 KV caches (Llama-3.1-70B, gpt-oss, MiniMax-M2.5 from
    2026-03-27) and MiniMax's --max-num-batched-tokens 2 x ISL: predicted as launched, those
    rows' TPOT is closer than with the checkpoint's BF16 KV and vLLM's default budget."""
    v = [r for r in rows[0] if r.engine == "vllm"]
    groups = [g for g in fit.groups(v) if g.workload.kv_dtype or g.workload.token_budget]
    assert {g.workload.token_budget for g in groups} >= {0, 2048, 16384}
    on, off = [], []
    for g, pr in zip(groups, fit.predict_groups(groups, FITTED), strict=True):
        if pr is None:
            continue
        w = dataclasses.replace(g.workload, kv_dtype="", token_budget=0)
        on += list(pr.tpot_ms / g.tpot - 1)
        off += list(serving.predict(g.model, g.host, g.rows[0].layout, w, g.conc).tpot_ms
                    / g.tpot - 1)  # fmt: skip
    assert len(on) >= 400
    assert np.median(np.abs(on)) < np.median(np.abs(off))
