"""Calibrated mode's spreads, estimated on the fixture (planner/cost/fitted.json ``calibration``).

    python -m fitting --calibration            # print them (seconds; the fit's values stay)
    python -m fitting --calibration --write    # ... and write them
    python -m fitting --bands --calibration --write   # host_spread from held-out errors

planner.cost.calibrate_fit models a host's log TPOT errors as: its factors (each log factor
~ N(0, prior_sd^2)) times their sensitivities, plus an error all points of one layout share
(layout_sd), plus each point's own (point_sd). Every (engine, model, format, GPU) of the
fixture is one host; each of its layouts has a mean log error m_L at the fitted parameters.
Method of moments on them:

- point_sd: the spread of a layout's points about their mean;
- host level: the covariance of m_A and m_B over pairs of *different* layouts of one host
  (what one layout's level says about another's); its square root is the prior of the
  factors a sweep moves on a host like the fit's (fixed costs, and the collectives where no
  comm curve measured them: one TP size cannot tell the two apart): they move other layouts
  only as much as levels carry over on the fixture;
- layout_sd: what is left of the layouts' mean square: a layout's own level.

Bandwidth and compute are held at the fit's on a host like the fit's (prior ``PINNED_SD``):
on the fixture a sweep's slope (what pins bandwidth) does not carry to other layouts, and a
compute factor fitted on one layout moves others the wrong way (prefill interference
differs by layout); docs/calibration.md has the numbers. A host class the fit never saw gets
``outside_prior_sd`` on every factor (its measurements decide). ``host_spread``, the spread of whole host-and-model mean errors, widens the band of
such a host (planner.cost.bands).

``carry_octaves``: how far along a sweep one point's error says anything about another's. The
correlation of two points' log errors within one sweep (one layout, one workload as launched,
one host), by octaves of concurrency apart (rounded); counting up from one octave, the upper
edge of the last distance whose correlation is significantly above zero (two-sided 5%: above
1.96 / sqrt(pairs)). On a host like the fit's, what is measured moves the concurrencies that
close to it, weighted by those correlations, and nothing farther (planner.cost.params.Window).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from fitting import fixture
from fitting.rows import Row
from planner.cost import calibrate_fit as cf
from planner.cost.params import ServingParams

SWEEP_FACTORS = ("fixed", "collectives")
CARRY_Z = 1.96  # a correlation this many standard errors (1 / sqrt(pairs)) above 0 carries
PINNED_SD = 1e-3
OUTSIDE_PRIOR_SD = 1.0


def layout_errors(rows: list[Row], p: ServingParams) -> dict[tuple, dict[tuple, list[float]]]:
    """host -> layout -> log(predicted / measured) of its points at ``p``."""
    hosts: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        hosts[(r.engine, r.model_path, r.quant, r.system)].append(r)
    out: dict[tuple, dict[tuple, list[float]]] = {}
    for key, hr in hosts.items():
        pts = [cf.Point(r.layout, fixture.workload_for(r), r.concurrency, r.tpot_ms) for r in hr]
        err = cf.log_errors(fixture.model_for(hr[0]), fixture.host_for(hr[0]), pts, p, None)
        by: dict[tuple, list[float]] = defaultdict(list)
        for x, e in zip(pts, err, strict=True):
            if np.isfinite(e):
                by[cf.layout_key(x.layout)].append(float(e))
        out[key] = dict(by)
    return out


def spreads(rows: list[Row], p: ServingParams, held_out: list[tuple] | None = None) -> dict:
    """The calibration section of fitted.json from the fixture's errors at ``p``."""
    errs = layout_errors(rows, p)
    within = [float(np.var(v, ddof=1)) for h in errs.values() for v in h.values() if len(v) > 1]
    point2 = float(np.mean(within))
    cross, own = [], []
    for h in errs.values():
        means = {k: (float(np.mean(v)), len(v)) for k, v in h.items()}
        for a, (ma, na) in means.items():
            own.append(ma * ma - point2 / na)
            cross += [ma * mb for b, (mb, _) in means.items() if b != a]
    host2 = max(float(np.mean(cross)), 0.0)
    layout2 = max(float(np.mean(own)) - host2, 0.0)
    host = math.sqrt(host2)
    prior = {f: (_round(host) if f in SWEEP_FACTORS else PINNED_SD) for f in cf.FACTORS}
    return {"prior_sd": prior, "layout_sd": _round(math.sqrt(layout2)),
            "point_sd": _round(math.sqrt(point2)), "outside_prior_sd": OUTSIDE_PRIOR_SD,
            "host_spread": host_spread(held_out) if held_out else _in_sample_spread(errs),
            "host_spread_from": "held out (leave one model out)" if held_out else "in-sample",
            "layout_pairs": len(cross), **carry(sweep_errors(rows, p))}  # fmt: skip


def sweep_errors(rows: list[Row], p: ServingParams) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each sweep's (log2 concurrency, log(predicted / measured)) at ``p``: one layout and one
    workload as launched, on one host (points the model cannot run left out)."""
    sweeps: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        sweeps[(r.engine, r.model_path, r.quant, r.system, r.layout, fixture.workload_for(r))
               ].append(r)  # fmt: skip
    out = []
    for sr in sweeps.values():
        pts = [cf.Point(r.layout, fixture.workload_for(r), r.concurrency, r.tpot_ms) for r in sr]
        e = cf.log_errors(fixture.model_for(sr[0]), fixture.host_for(sr[0]), pts, p, None)
        ok = np.isfinite(e)
        out.append((np.log2([r.concurrency for r in sr])[ok], e[ok]))
    return out


def carry(sweeps: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """``carry_octaves`` (the module doc) and the correlations it rests on, by octaves apart
    up to the first that does not carry."""
    pairs: dict[int, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for x, e in sweeps:
        for i, j in zip(*np.nonzero(x[None, :] > x[:, None]), strict=True):
            a, b = pairs[int(round(x[j] - x[i]))]
            a.append(float(e[i]))
            b.append(float(e[j]))
    corr: dict[str, float] = {}
    last = 0
    for d in range(1, max(pairs, default=0) + 1):
        a, b = pairs.get(d, ([], []))
        r = float(np.corrcoef(a, b)[0, 1]) if len(a) >= 3 else float("nan")
        corr[str(d)] = _round(r) if r == r else None
        if not r > CARRY_Z / math.sqrt(max(len(a), 1)):
            break
        last = d
    return {"carry_octaves": last + 0.5, "carry_correlation": corr}


def _in_sample_spread(errs: dict) -> float:
    means = [float(np.mean([e for v in h.values() for e in v])) for h in errs.values()
             if sum(len(v) for v in h.values()) >= 5]  # fmt: skip
    return _round(float(np.std(means)))


def host_spread(errs: list[tuple]) -> float:
    """The standard deviation of each host's mean log TPOT error (hosts of 5+ rows), from
    fitting.fit's (row, TPOT error, TTFT error) residuals."""
    by: dict[tuple, list[float]] = defaultdict(list)
    for r, e, _ in errs:
        if e == e and e > -1:
            by[(r.engine, r.model_path, r.quant, r.system)].append(math.log1p(e))
    means = [float(np.mean(v)) for v in by.values() if len(v) >= 5]
    return _round(float(np.std(means)))


def _round(v: float) -> float:
    return float(f"{v:.3g}")
