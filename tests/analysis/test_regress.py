"""Change detection on generated 30-night histories (2% run-to-run noise): a lasting step
is found at its first run and nowhere else, every night a cron check would run; a single
outlier never is; improvements are improvements; the thresholds do what they say."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import regress
from tests.analysis.histories import Plan

SEEDS = range(1, 11)


def _history(plan: Plan) -> np.ndarray:
    return 40.0 * plan.factors()  # e.g. TPOT in ms


@pytest.mark.parametrize("seed", SEEDS)
def test_step_at_run_20_is_reported_at_run_20_every_night_after_and_never_before(seed) -> None:
    values = _history(Plan(step_night=20, step=0.12, seed=seed))
    assert [s.index for s in regress.shifts(values)] == [19]  # run 20, nothing else
    for night in range(6, 31):  # what `check` says each night, seeing runs 1..night
        shift = regress.current_shift(values[:night])
        if night < 20 + regress.MIN_RUNS - 1:  # runs 20, 21, 22 make the level
            assert shift is None, f"night {night}: {shift}"
        else:
            assert shift is not None and shift.index == 19, f"night {night}: {shift}"
            assert shift.kind(regress.LOWER) == "regression"
            assert shift.change == pytest.approx(0.12, abs=0.03)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_single_30pct_outlier_is_never_a_change(seed) -> None:
    for night in range(1, 31):
        values = _history(Plan(outlier_night=night, outlier=0.30, seed=seed))
        assert regress.shifts(values) == [], f"outlier on night {night}"
        assert regress.current_shift(values[:night]) is None  # nor as the newest run
        assert regress.outliers(values)[night - 1]


def test_two_outliers_in_a_row_are_not_a_level_but_three_are() -> None:
    two = _history(Plan(seed=3))
    two[24:26] *= 1.3
    assert regress.shifts(two) == []
    three = _history(Plan(seed=3))
    three[24:27] *= 1.3
    found = regress.shifts(three)
    assert [s.index for s in found] == [24, 27]  # up at run 25, back down at run 28


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_beside_an_outlier_is_still_at_run_20(seed) -> None:
    values = _history(Plan(step_night=20, step=0.12, outlier_night=25, outlier=0.3, seed=seed))
    assert [s.index for s in regress.shifts(values)] == [19]


@pytest.mark.parametrize("better,move,kind", [(regress.LOWER, -0.12, "improvement"),
                                              (regress.LOWER, 0.12, "regression"),
                                              (regress.HIGHER, 0.12, "improvement"),
                                              (regress.HIGHER, -0.12, "regression")])  # fmt: skip
def test_direction_per_metric(better, move, kind) -> None:
    shift = regress.current_shift(_history(Plan(step_night=20, step=move, seed=5)))
    assert shift is not None and shift.index == 19
    assert shift.kind(better) == kind
    assert np.sign(shift.change) == np.sign(move)


def test_min_change_decides_what_is_worth_a_line() -> None:
    values = _history(Plan(cv=0.005, step_night=16, step=0.03, seed=2))  # steady, +3%
    assert regress.shifts(values) == []  # below the default 5%
    found = regress.shifts(values, min_change=0.02)
    assert [s.index for s in found] == [15]
    assert found[0].change == pytest.approx(0.03, abs=0.01)


def test_min_runs_decides_when_a_new_level_counts() -> None:
    values = _history(Plan(step_night=29, step=0.12, seed=4))  # two runs at the new level
    assert regress.current_shift(values) is None
    shift = regress.current_shift(values, min_runs=2)
    assert shift is not None and shift.index == 28


def test_several_moves_in_a_long_history() -> None:
    rng = np.random.default_rng(9)
    values = 100 * (1 + 0.02 * rng.standard_normal(1000))
    values[300:] *= 1.08
    values[700:] /= 1.08
    found = regress.shifts(values)
    assert [s.index for s in found] == [300, 700]
    assert [s.kind(regress.HIGHER) for s in found] == ["improvement", "regression"]


def test_flat_short_or_odd_series_have_no_change() -> None:
    assert regress.shifts(_history(Plan(seed=8))) == []
    assert regress.shifts([40.0, 48.0, 47.0, 49.0, 48.0]) == []  # too short for two levels
    assert regress.shifts([0.0] * 10 + [5.0] * 10) == []  # no positive level
    assert regress.shifts([50.0] * 30) == []
    steady = [50.0] * 15 + [60.0] * 15  # noiseless: a step is still a step
    assert [s.index for s in regress.shifts(steady)] == [15]
