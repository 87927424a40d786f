"""planner.cost.routing.measured against an independent Poisson-binomial computation, and
the placements of planner.cost.expert_load on small hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest

from planner.cost import routing
from planner.cost.expert_load import (
    ExpertLoad,
    balanced_ranks,
    contiguous_ranks,
    map_loads,
    rank_figures,
)
from planner.errors import PlannerInputError


def _pmf(ps: np.ndarray) -> np.ndarray:
    out = np.array([1.0])
    for p in ps:
        out = np.convolve(out, [1 - p, p])
    return out


def _expected_busiest(shares: np.ndarray, ranks: np.ndarray, k: int, t: float, ep: int) -> float:
    """E[max over ranks of touched experts] for one layer, by convolving Bernoullis."""
    p = 1 - (1 - np.clip(k * shares, 0, 1)) ** t
    cdfs = [np.cumsum(_pmf(p[ranks == r])) for r in range(ep)]
    m = len(shares) // ep
    return float(sum(1 - np.prod([min(c[j], 1.0) for c in cdfs]) for j in range(m)))


@pytest.mark.parametrize("placement", ["contiguous", "balanced"])
def test_measured_matches_an_independent_poisson_binomial(placement) -> None:
    rng = np.random.default_rng(5)
    counts = np.zeros((4, 32))
    counts[1:] = rng.lognormal(0, 1.0, (3, 32)) * 100  # layer 0 dense
    load = ExpertLoad(counts, placement=placement)
    ep, k = 4, 4
    tokens = np.array([1.0, 3, 16, 40, 200])  # 40 and 200 fall between grid points
    routing.clear_cache()
    got = routing.measured(load, k, tokens, ep)
    for i, t in enumerate(tokens):
        want = []
        for row in counts[1:]:
            ranks = (balanced_ranks(row[None], ep)[0] if placement == "balanced"
                     else contiguous_ranks(32, ep))  # fmt: skip
            want.append(_expected_busiest(row / row.sum(), ranks, k, t, ep))
        tol = 1e-9 if t in (1, 3, 16) else 3e-3  # on the exact grid, else interpolated
        assert got.busiest_experts[i] == pytest.approx(np.mean(want), rel=tol)
        mean = np.mean([(1 - (1 - k * row / row.sum()) ** t).sum() / ep for row in counts[1:]])
        assert got.mean_experts[i] == pytest.approx(mean, rel=tol)
    assert (got.busiest_experts >= got.mean_experts - 1e-12).all()


def test_placements_on_a_small_layer() -> None:
    row = np.array([[10.0, 9, 1, 1, 1, 1, 1, 0]])
    assert contiguous_ranks(8, 2).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    # heaviest first onto the lightest rank with room: 10->0, 9->1, then the 1s alternate
    # onto the lighter rank, the 0 last onto the rank with room
    ranks = balanced_ranks(row, 2)[0]
    loads = [row[0][ranks == r].sum() for r in range(2)]
    assert sorted(loads) == [12.0, 12.0] and np.bincount(ranks).tolist() == [4, 4]
    load = ExpertLoad(row)
    contiguous = rank_figures(load, 2, "contiguous")[0]
    assert (contiguous.max_tokens, contiguous.mean_tokens, contiguous.busiest_rank) == (21, 12, 0)
    assert rank_figures(load, 2, "balanced")[0].max_over_mean == 1.0
    # a map with expert 0 replicated on both ranks: half its tokens on each
    mapping = np.array([[0, 1, 2, 3, 0, 4, 5, 6, 7, 1]])
    assert map_loads(row, mapping, 2).tolist() == [[5 + 4.5 + 1 + 1 + 5, 4.5 + 1 + 1 + 1 + 0]]
    with pytest.raises(PlannerInputError):
        map_loads(row, mapping, 3)  # 10 slots over 3 ranks


def test_a_load_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="61 layers x 384 experts, but deepseek-v3"):
        ExpertLoad(np.ones((61, 384))).check(61, 256, "deepseek-v3")
    with pytest.raises(PlannerInputError, match="no layer routed"):
        ExpertLoad(np.zeros((2, 8))).check(2, 8, "m")
    with pytest.raises(PlannerInputError):
        ExpertLoad(np.array([[1.0, -1.0]]))
