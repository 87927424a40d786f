"""Calibrated mode: per-host factors from measured points, error before and after."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from fitting import fit, fixture
from planner.cost.calibrate import Measured, MeasuredComm, calibrate
from planner.cost.comm import CommCurve, CommSet
from planner.cost.params import FITTED
from planner.cost.serving import ServeLayout, Workload, predict
from planner.errors import PlannerInputError
from planner.specs import hardware, models

needs_fixture = pytest.mark.skipif(not fixture.CSV.is_file(), reason=f"{fixture.CSV} absent")


@needs_fixture
def test_a_sweep_of_the_model_on_the_host_cuts_its_error() -> None:
    """The fixture's worst-predicted vLLM sweep (model, format, GPU): calibrating on its own
    points at least halves its median error."""
    rows, _ = fixture.load_rows()
    vllm = [r for r in rows if r.engine == "vllm"]
    by: dict[tuple, list] = defaultdict(list)
    for r, err, _ttft in fit.errors(fit.groups(vllm), FITTED):
        by[(r.model_path, r.quant, r.system)].append(abs(err))
    worst = max((k for k in by if len(by[k]) >= 10), key=lambda k: np.median(by[k]))
    sweep = [r for r in vllm if (r.model_path, r.quant, r.system) == worst]
    pts = [Measured(r.layout, r.isl, r.osl, r.concurrency, r.tpot_ms) for r in sweep]
    cal = calibrate(fixture.model_for(sweep[0]), fixture.host_for(sweep[0]), pts)
    assert cal.median_before == pytest.approx(float(np.median(by[worst])), rel=0.05)
    assert cal.median_before > 0.1
    assert cal.median_after < cal.median_before / 2
    assert cal.factors["comm"] == 1.0
    assert "->" in cal.sentence()


def test_measured_collectives_replace_the_modelled_ones() -> None:
    m, hw = models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x")
    lay = ServeLayout(tp=8, moe_tp=8)
    modelled = predict(m, hw, lay, Workload(1, 256), np.array([1])).breakdown_ms["allreduce"][0]
    traced = MeasuredComm(
        lay, 1, 1, 256, moe_allreduce_us=60 * 78.0, attention_allreduce_us=63 * 78.0
    )  # the write-up's 78 us calls
    pts = [Measured(lay, 1, 256, 1, 21.7)]  # the profiled step the 78 us calls were traced in
    cal = calibrate(m, hw, pts, comm=[traced])
    assert cal.factors["comm"] == pytest.approx(traced.total_ms / modelled, rel=1e-3)
    after = predict(m, hw, lay, Workload(1, 256), np.array([1]), cal.params)
    assert after.breakdown_ms["allreduce"][0] == pytest.approx(traced.total_ms, rel=1e-6)
    assert cal.factors["bandwidth"] == 1.0  # one point: only fixed costs move
    assert abs(cal.error_after[0]) < 0.05


def test_stored_curves_are_used_for_their_world_size_only() -> None:
    m, hw = models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x")
    curve = CommCurve("all_reduce", 8, (1024.0, 1e6), (100.0, 100.0), "measured", "test run")
    w = Workload(1, 256)
    base = predict(m, hw, ServeLayout(8, moe_tp=8), w, np.array([1]), FITTED)
    used = predict(m, hw, ServeLayout(8, moe_tp=8), w, np.array([1]), FITTED,
                   CommSet([curve], hw))  # fmt: skip
    assert used.breakdown_ms["allreduce"][0] == pytest.approx(123 * 100.0 / 1e3)
    assert used.breakdown_ms["allreduce"][0] > base.breakdown_ms["allreduce"][0]
    m = models.preset("minimax-m2.5")  # fits on 4 of the 8 GPUs
    other = predict(m, hw, ServeLayout(4, moe_tp=4), w, np.array([1]), FITTED,
                    CommSet([curve], hw))  # fmt: skip
    plain = predict(m, hw, ServeLayout(4, moe_tp=4), w, np.array([1]), FITTED)
    assert other.breakdown_ms["allreduce"][0] == plain.breakdown_ms["allreduce"][0]


def test_no_points_is_an_error() -> None:
    with pytest.raises(PlannerInputError, match="no measured points"):
        calibrate(models.preset("kimi-k2.5"), hardware.preset("h200-sxm-8x"), [])
