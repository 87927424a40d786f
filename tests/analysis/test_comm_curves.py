"""The latency-cliff finder and the bytes -> tokens-per-GPU mapping."""

from __future__ import annotations

import pytest

from analysis.comm_curves import find_cliff, tokens_equivalent


def test_reference_case_all_to_all_cliff_at_16_tokens() -> None:
    # PCIe-only host: 19-25 us at 1 token per GPU, 1007 us at 16 (REFERENCE.md §1).
    cliff = find_cliff([1, 2, 4, 8, 16, 32], [22, 23, 25, 31, 1007, 1950])
    assert cliff is not None
    assert (cliff.x, cliff.last_flat_x, cliff.latency_us) == (16, 8, 1007)
    assert cliff.flat_us == pytest.approx(24.0)  # median of 22, 23, 25, 31
    assert cliff.ratio == pytest.approx(1007 / 24.0)
    assert "cliff at 16 tokens" in cliff.describe("tokens")


def test_flat_curve_has_no_cliff() -> None:
    assert find_cliff([1, 2, 4, 8], [20, 21, 19, 22]) is None


def test_single_slow_sample_is_not_a_cliff() -> None:
    # One noisy spike at 4 tokens, then back to flat, then the real climb at 32.
    cliff = find_cliff([1, 2, 4, 8, 16, 32, 64], [20, 20, 95, 21, 22, 60, 130])
    assert cliff is not None and cliff.x == 32 and cliff.last_flat_x == 16


def test_order_and_bad_points_are_handled() -> None:
    cliff = find_cliff([64, 1, 0, 16, 4], [500, 10, 10, 11, 10])
    assert cliff is not None and cliff.x == 64  # x=0 dropped, points sorted by size
    assert find_cliff([1, 2], [10, 100]) is None  # too few points to tell flat from climb


def test_rise_threshold_is_a_parameter() -> None:
    xs, ys = [1, 2, 4, 8], [10, 11, 16, 17]
    assert find_cliff(xs, ys) is None
    cliff = find_cliff(xs, ys, rise=1.5)
    assert cliff is not None and cliff.x == 4


def test_tokens_equivalent_inverts_comm_sizing() -> None:
    assert tokens_equivalent("all_reduce", 14336, 8, 7168, "bf16") == 1
    assert tokens_equivalent("all_to_all", 8 * 14336 * 16, 8, 7168, "bf16") == 16
    assert tokens_equivalent("all_gather", 4096, None, 64, "fp32") is None  # needs the world
    assert tokens_equivalent("broadcast", 4096, 8, 64, "fp32") is None
    assert tokens_equivalent("all_reduce", 0, 8, 64, "fp32") is None
