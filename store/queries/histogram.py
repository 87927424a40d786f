"""Quantiles from cumulative Prometheus histogram buckets (pure; no pandas)."""

from __future__ import annotations

import math


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus-style quantile from cumulative ``(le, count)`` buckets (linear in a bucket).

    None when the histogram is empty; the upper bound of the last finite bucket when the
    quantile falls in ``+Inf`` (as Prometheus' ``histogram_quantile`` does).
    """
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le
