"""How far one point's error carries along a sweep (fitting.calibration.carry)."""

from __future__ import annotations

import numpy as np
import pytest

from fitting import calibration, fixture
from planner.cost.params import CALIBRATION, FITTED


def _moving_sum_sweeps(width: int, sweeps: int = 400, octaves: int = 8) -> list:
    """Sweeps whose error at octave x sums ``width`` independent draws ending at x: errors d
    octaves apart share width - d of them (correlation (width - d) / width), none from d =
    width on."""
    rng = np.random.default_rng(7)
    out = []
    for _ in range(sweeps):
        z = rng.normal(size=octaves + width)
        e = np.array([z[x:x + width].sum() for x in range(octaves)])
        out.append((np.arange(octaves, dtype=float), 0.05 * e))
    return out


@pytest.mark.parametrize("width", [1, 3])
def test_the_carry_ends_where_the_correlation_stops_being_significant(width: int) -> None:
    got = calibration.carry(_moving_sum_sweeps(width))
    assert got["carry_octaves"] == width - 0.5
    corr = got["carry_correlation"]
    for d in range(1, width):
        assert corr[str(d)] == pytest.approx((width - d) / width, abs=0.06)
    assert abs(corr[str(width)]) < 0.1 and str(width + 1) not in corr  # it stops at the first


def test_repeats_of_one_concurrency_and_one_point_sweeps_add_no_pairs() -> None:
    x = np.array([2.0, 2.0])  # two runs of one concurrency: no octave apart
    assert calibration.carry([(x, np.array([0.1, -0.1])), (np.zeros(1), np.ones(1))]) == {
        "carry_octaves": 0.5, "carry_correlation": {}}  # fmt: skip


@pytest.mark.skipif(not fixture.CSV.is_file(), reason=f"{fixture.CSV} absent")
def test_the_recorded_carry_is_the_fixtures() -> None:
    rows, _ = fixture.load_rows()
    got = calibration.carry(calibration.sweep_errors(rows, FITTED))
    assert got == {k: CALIBRATION[k] for k in ("carry_octaves", "carry_correlation")}
    assert got["carry_octaves"] >= 1.5  # neighbours carry on the fixture, not the whole sweep
    assert got["carry_octaves"] < max(int(k) for k in got["carry_correlation"]) + 0.5
