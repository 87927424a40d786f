"""Expert routing under uniform top-k: how many experts the busiest EP rank runs."""

from __future__ import annotations

import numpy as np

_EMAX_CACHE: dict[tuple, np.ndarray] = {}


def expected_max_binomial(n: int, p: np.ndarray, groups: int) -> np.ndarray:
    """E[max of `groups` iid Binomial(n, p)]: the busiest EP rank's touched experts."""
    p = np.asarray(p, dtype=float)
    key = (n, groups, p.tobytes())
    if key not in _EMAX_CACHE:
        if len(_EMAX_CACHE) > 64:
            _EMAX_CACHE.clear()
        _EMAX_CACHE[key] = _emax(n, p, groups)
    return _EMAX_CACHE[key]


def clear_cache() -> None:
    _EMAX_CACHE.clear()


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
