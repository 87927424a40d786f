"""The benchmark's measurements of a priced schedule, as the client computes them.

A :class:`~planner.sched.core.Schedule` says, in steps, what each segment held and when each
request was sent (``arrive``), got its first token (``first``) and ended (``end``). Given each
segment's time (planner.cost prices one step of each shape), the client's definitions
(planner.sched.bench) give per request TTFT = time from the start of ``arrive`` to the end of
``first`` plus the request path outside the GPU, E2EL likewise to the end of ``end``, TPOT =
(E2EL - TTFT) / (output - 1) and ITL = each step between two of its tokens.

The means are linear in the segments' times (mean TPOT = sum over segments of time x the
share of the requests' per-token weight that segment carries), so the fit prices a few
aggregated shapes per point instead of every segment (:func:`reduced`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.sched.bench import percentiles
from planner.sched.core import Schedule


@dataclass(frozen=True)
class Shapes:
    """Step shapes to price: decoding requests and their mean context on the busiest rank,
    decode tokens of every rank, prompt tokens on the busiest rank and of every rank."""

    batch: np.ndarray
    context: np.ndarray
    moe_tokens: np.ndarray
    prefill_max: np.ndarray
    prefill_sum: np.ndarray

    @staticmethod
    def of(s: Schedule) -> Shapes:
        return Shapes(s.batch, s.context, s.moe_tokens, s.prefill_max, s.prefill_sum)

    def __len__(self) -> int:
        return int(self.batch.size)


def _span_weights(n_seg: int, lo: np.ndarray, hi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per segment: the sum of ``w`` over the requests whose span [lo, hi] covers it."""
    d = np.zeros(n_seg + 1)
    np.add.at(d, lo, w)
    np.add.at(d, hi + 1, -w)
    return np.cumsum(d[:-1])


def segment_weights(s: Schedule) -> dict[str, np.ndarray]:
    """Per segment, what one millisecond of one of its steps adds to each mean: mean TTFT
    (before the request path), mean TPOT, mean E2EL. Computed once per schedule (read-only)."""
    got = s.derived.get("segment_weights")
    if got is None:
        n, w = s.steps.size, s.weight.astype(float)
        total = w.sum()
        many = s.osl > 1
        out = {"ttft": _span_weights(n, s.arrive, s.first, w) / total,
               "e2el": _span_weights(n, s.arrive, s.end, w) / total}  # fmt: skip
        per_tok = np.where(many, w / np.maximum(s.osl - 1, 1), 0.0)
        tpot_total = w[many].sum() or 1.0
        out["tpot"] = _span_weights(n, s.first + 1, s.end, per_tok) / tpot_total
        got = s.derived["segment_weights"] = {k: _frozen(v * s.steps) for k, v in out.items()}
    return got


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False  # kept with the (shared, cached) schedule
    return a


# Buckets the fit aggregates segments into: the decode batch exact up to 16, then within 3%;
# prompt tokens exact up to 64, then within 5%. Context and the other tokens are weight-
# averaged within a bucket (a step's time is linear in its KV reads, nearly so in the rest).
_EXACT_BATCH, _BATCH_STEP, _EXACT_TOKENS, _TOKEN_STEP = 16.0, 0.03, 64.0, 0.05


def _bins(x: np.ndarray, exact: float, step: float) -> np.ndarray:
    return np.where(x <= exact, x, exact + np.floor(np.log(np.maximum(x, 1.0) / exact) / step))


def reduced(s: Schedule, weight: np.ndarray) -> tuple[Shapes, np.ndarray]:
    """The schedule's segments aggregated into a few shapes, each with its share of
    ``weight`` (one of :func:`segment_weights`) and its weight-averaged dimensions."""
    keep = weight > 0
    w = weight[keep]
    key = np.stack([_bins(s.batch[keep], _EXACT_BATCH, _BATCH_STEP),
                    _bins(s.prefill_max[keep], _EXACT_TOKENS, _TOKEN_STEP)])  # fmt: skip
    _, inv = np.unique(key, axis=1, return_inverse=True)
    inv = inv.ravel()
    m = inv.max() + 1 if inv.size else 0
    tot = np.bincount(inv, w, m)
    safe = np.where(tot > 0, tot, 1.0)

    def avg(x: np.ndarray) -> np.ndarray:
        return np.bincount(inv, w * x[keep], m) / safe

    shapes = Shapes(avg(s.batch), avg(s.context), avg(s.moe_tokens), avg(s.prefill_max),
                    avg(s.prefill_sum))  # fmt: skip
    return shapes, tot


@dataclass(frozen=True)
class Measured:
    """The benchmark's report of one run: means and p50 / p90 / p99 (ms), and how full the
    engine was, time-weighted: requests running on the busiest attention rank, requests
    queued per attention rank."""

    ttft_ms: float
    tpot_ms: float
    itl_ms: float
    e2el_ms: float
    percentiles: dict[str, dict[str, float]]
    running_mean: float
    queued_mean: float


@dataclass(frozen=True)
class _Requests:
    """What :func:`measure` reads of a schedule whatever the step times: computed once per
    schedule (a schedule is priced for every layout and parameter set that shares it)."""

    first_end: np.ndarray  # the segment after each request's first token
    last_end: np.ndarray  # the segment after its last token
    many: np.ndarray  # requests of more than one output token (those with a TPOT)
    gaps: np.ndarray  # their output tokens less one
    w: np.ndarray  # weights, as floats
    w_sum: float
    wm: np.ndarray  # weights of the ``many`` requests
    wm_sum: float
    itl_w: np.ndarray  # per segment: token gaps in it, weighted (the pooled ITL's weights)
    itl_sum: float

    @staticmethod
    def of(s: Schedule) -> _Requests:
        got = s.derived.get("requests")
        if got is None:
            many = s.osl > 1
            w = s.weight.astype(float)
            itl_w = _span_weights(s.steps.size, s.first + 1, s.end, w) * s.steps
            got = s.derived["requests"] = _Requests(
                s.first + 1, s.end + 1, many, s.osl[many] - 1, w, float(w.sum()), w[many],
                float(w[many].sum()), itl_w, max(float(itl_w.sum()), 1e-12))  # fmt: skip
        return got


def _mean(x: np.ndarray, w: np.ndarray, w_sum: float) -> float:
    """``np.average(x, weights=w)`` (the same products and sums) with ``w`` as floats."""
    return float(np.multiply(x, w).sum() / w_sum)


def measure(s: Schedule, step_ms: np.ndarray, request_path_ms: float) -> Measured:
    """The client's metrics when one step of each segment takes ``step_ms``."""
    q = _Requests.of(s)
    seg_ms = step_ms * s.steps
    cum = np.concatenate([[0.0], np.cumsum(seg_ms)])
    start = cum[s.arrive]
    ttft = cum[q.first_end] - start + request_path_ms
    e2el = cum[q.last_end] - start + request_path_ms
    tpot = (e2el[q.many] - ttft[q.many]) / q.gaps
    # ITL: every gap between two tokens of a request, pooled (a decode step of its segment)
    itl = float((q.itl_w * step_ms).sum() / q.itl_sum)
    total_ms = max(float(seg_ms.sum()), 1e-12)
    ranks = max(s.ranks, 1)
    return Measured(
        ttft_ms=_mean(ttft, q.w, q.w_sum),
        tpot_ms=_mean(tpot, q.wm, q.wm_sum) if tpot.size else float("nan"),
        itl_ms=itl, e2el_ms=_mean(e2el, q.w, q.w_sum),
        percentiles={"ttft_ms": percentiles(ttft, s.weight),
                     "tpot_ms": percentiles(tpot, s.weight[q.many]),
                     "e2el_ms": percentiles(e2el, s.weight)},
        running_mean=float((s.running * seg_ms).sum() / total_ms),
        queued_mean=float((s.queued * seg_ms).sum() / total_ms / ranks),
    )  # fmt: skip
