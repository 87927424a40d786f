"""Expert routing: how many experts the busiest EP rank runs, under uniform top-k or a
measured distribution (planner.cost.expert_load)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.expert_load import ExpertLoad, placement_ranks

_EMAX_CACHE: dict[tuple, np.ndarray] = {}


def expected_max_binomial(n: int, p: np.ndarray, groups: int) -> np.ndarray:
    """E[max of `groups` iid Binomial(n, p)]: the busiest EP rank's touched experts."""
    p = np.asarray(p, dtype=float)
    key = (n, groups, p.tobytes())
    if key not in _EMAX_CACHE:
        if len(_EMAX_CACHE) > 64:
            _EMAX_CACHE.clear()
        # Elementwise in p, whose values repeat (a schedule's steps share token counts):
        # each distinct value computed once (the loop runs n times over the array).
        distinct, where = np.unique(p, return_inverse=True)
        _EMAX_CACHE[key] = _emax(n, distinct, groups)[where.reshape(p.shape)]
    return _EMAX_CACHE[key]


def clear_cache() -> None:
    _EMAX_CACHE.clear()
    _MEASURED_CACHE.clear()
    _RANKS_CACHE.clear()


def _emax(n: int, p: np.ndarray, groups: int) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    q = 1.0 - p
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        pmf = q**n
        cdf = pmf.copy()
        out = np.zeros_like(p)
        odds = np.where(q > 0, p / np.where(q > 0, q, 1.0), 0.0)
        for j in range(n):
            out += 1.0 - cdf**groups
            pmf = pmf * (n - j) / (j + 1) * odds
            cdf = np.minimum(cdf + pmf, 1.0)
    return np.where(q <= 1e-12, float(n), out)


# ---- a measured distribution (planner.cost.expert_load.ExpertLoad) ----------------------
# The figures are computed once per (distribution, placement, top-k, EP size) on a fixed grid
# of tokens per step: every count up to EXACT_POINTS, then four points per doubling (32, 64,
# 128, ... exactly). Between them what is interpolated (in log(tokens)) is the ratio to
# uniform routing's closed form, which is then evaluated at the step's own tokens: within
# 0.15% of exact on a lognormal DeepSeek-V3-shaped distribution, and exactly uniform routing
# for a uniform measurement at any tokens (a simulated schedule's steps fall between the
# grid's points).
EXACT_POINTS = 16
PER_DOUBLING = 4
_MEASURED_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, float]] = {}
_RANKS_CACHE: dict[tuple, np.ndarray] = {}


@dataclass(frozen=True)
class MeasuredRouting:
    """Per decode step, averaged over the routed layers: the mean EP rank's touched experts,
    the busiest rank's expected touched experts, and the busiest rank's tokens over the mean
    rank's (its grouped GEMMs' FLOPs)."""

    mean_experts: np.ndarray
    busiest_experts: np.ndarray
    token_factor: float


def measured(load: ExpertLoad, top_k: int, tokens: np.ndarray, ep: int) -> MeasuredRouting:
    """The busiest EP rank under a measured routing distribution, placed as ``load.placement``.

    A token routes to expert e with probability k x share_e (the share of the layer's routed
    tokens e received; uniform routing gives k / E). Over T tokens expert e is touched with
    p_e = 1 - (1 - k share_e)^T; a rank's touched experts are a sum of independent
    Bernoullis (Poisson-binomial), and the layer waits for the maximum over ranks, whose
    expectation is sum_j (1 - prod_r P(X_r <= j)). With equal shares this is exactly
    ``expected_max_binomial``, so a uniform measurement prices as uniform routing does.
    """
    t = np.maximum(np.asarray(tokens, dtype=float), 1.0)
    key = (load.digest, load.placement, top_k, ep)
    cached = _MEASURED_CACHE.get(key)
    if cached is None or cached[0][-1] < t.max():
        if len(_MEASURED_CACHE) > 64:
            _MEASURED_CACHE.clear()
        grid = token_grid(max(float(t.max()), cached[0][-1] * 2 if cached else 0.0))
        _MEASURED_CACHE[key] = (grid, *_measured_at(load, top_k, grid, ep),
                                token_factor(load, ep))  # fmt: skip
    grid, mean, busiest, factor = _MEASURED_CACHE[key]
    experts = load.counts.shape[1]
    u_mean, u_busiest = _uniform(experts, top_k, grid, ep)
    at_mean, at_busiest = _uniform(experts, top_k, t, ep)
    x, at = np.log(t), np.log(grid)
    return MeasuredRouting(at_mean * np.interp(x, at, mean / u_mean),
                           at_busiest * np.interp(x, at, busiest / u_busiest), factor)  # fmt: skip


def _uniform(experts: int, top_k: int, tokens: np.ndarray,
             ep: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Uniform top-k routing's mean and busiest EP rank's touched experts at ``tokens``."""
    touched = 1.0 - (1.0 - top_k / experts) ** tokens
    mean = experts / ep * touched
    return mean, (expected_max_binomial(experts // ep, touched, ep) if ep > 1 else mean)


def token_grid(top: float) -> np.ndarray:
    """1, 2, ... EXACT_POINTS, then EXACT_POINTS x 2^(i / PER_DOUBLING) until ``top``."""
    exact = np.arange(1.0, EXACT_POINTS + 1)
    if top <= EXACT_POINTS:
        return exact
    n = int(np.ceil(PER_DOUBLING * np.log2(top / EXACT_POINTS)))
    return np.concatenate([exact, EXACT_POINTS * 2.0 ** (np.arange(1, n + 1) / PER_DOUBLING)])


def _ranks(load: ExpertLoad, ep: int) -> np.ndarray:
    """(routed layers x experts) rank of each expert under ``load.placement`` (cached)."""
    key = (load.digest, load.placement, ep)
    if key not in _RANKS_CACHE:
        if len(_RANKS_CACHE) > 64:
            _RANKS_CACHE.clear()
        _RANKS_CACHE[key] = placement_ranks(load.counts[load.routed_layers()], ep,
                                            load.placement)  # fmt: skip
    return _RANKS_CACHE[key]


def token_factor(load: ExpertLoad, ep: int) -> float:
    """The busiest EP rank's routed tokens over the mean rank's, averaged over the routed
    layers (1 without EP): what its grouped GEMMs compute beyond the mean rank's."""
    if ep <= 1:
        return 1.0
    shares = load.shares()
    ranks = _ranks(load, ep)
    per_rank = np.zeros((shares.shape[0], ep))
    np.add.at(per_rank, (np.repeat(np.arange(shares.shape[0]), shares.shape[1]),
                         np.ravel(ranks)), np.ravel(shares))  # fmt: skip
    return float(np.mean(per_rank.max(axis=1) * ep))


def _measured_at(load: ExpertLoad, top_k: int, tokens: np.ndarray,
                 ep: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    shares = load.shares()  # (layers, E), routed layers only
    layers, experts = shares.shape
    # Each layer's experts grouped by rank: (layers, ep, E / ep).
    order = np.argsort(_ranks(load, ep), axis=1, kind="stable")
    grouped = np.take_along_axis(shares, order, axis=1).reshape(layers, ep, experts // ep)
    q = np.clip(top_k * grouped, 0.0, 1.0)
    p = 1.0 - (1.0 - q[None]) ** tokens[:, None, None, None]  # (T, layers, ep, m)
    mean = p.sum(axis=(2, 3)).mean(axis=1) / ep
    busiest = mean if ep == 1 else _expected_max(p).mean(axis=1)
    return mean, busiest


def _expected_max(p: np.ndarray) -> np.ndarray:
    """E[max over the ranks axis (-2) of the sum of independent Bernoulli(p) over axis -1]."""
    m = p.shape[-1]
    pmf = np.zeros(p.shape[:-1] + (m + 1,))
    pmf[..., 0] = 1.0
    for j in range(m):  # after expert j only counts 0..j+1 can be nonzero
        pj = p[..., j : j + 1]
        pmf[..., 1 : j + 2] = pmf[..., 1 : j + 2] * (1.0 - pj) + pmf[..., : j + 1] * pj
        pmf[..., :1] *= 1.0 - pj
    cdf = np.minimum(np.cumsum(pmf, axis=-1), 1.0)
    return (1.0 - np.prod(cdf[..., :-1], axis=-2)).sum(axis=-1)
