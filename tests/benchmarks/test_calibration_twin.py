"""benchmarks/calibration_accuracy.py: for a sweep the calibration made worse, the improved
sweep whose evidence (its lowest point's error) is nearest - the pair a rule of that evidence
alone cannot tell apart."""

from __future__ import annotations

from benchmarks.calibration_accuracy import Higher, _twin


def sweep(n: int, lowest: float, applied: bool = True) -> Higher:
    return Higher(0.1, 0.1, n, 0.10, "sglang", "b200_sxm", f"model-{n}", 8, 0.1, applied,
                  lowest, f"TP=8 isl 8192 osl 1024 from concurrency 4 #{n}")  # fmt: skip


def test_the_twin_is_the_improved_applied_sweep_nearest_in_lowest_point_error() -> None:
    per = {0: [sweep(0, 0.16)], 1: [sweep(1, 0.10)], 2: [sweep(2, 0.17)],
           3: [sweep(3, 0.16, applied=False)], 4: [sweep(4, 0.159)]}  # fmt: skip
    change = {0: 0.027, 1: -0.05, 2: -0.033, 3: -0.01, 4: 0.01}
    text = _twin(0, per, change)
    # sweep 3 is nearer but was not applied, sweep 4 nearer but worse: neither is a twin
    assert "(sweep 2), lowest point +17.0%, 10.0% -> 6.7%" in text
    assert text.startswith("its lowest point +16.0%")


def test_no_improved_sweep_says_so() -> None:
    per = {0: [sweep(0, 0.16)], 1: [sweep(1, 0.10, applied=False)]}
    assert _twin(0, per, {0: 0.02, 1: -0.01}) == ("no sweep the calibration improved to "
                                                   "compare with")  # fmt: skip
