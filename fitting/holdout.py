"""Statistics of the serving model's residuals on the fixture: summaries and bands.

    python -m fitting --bands --write   # writes BANDS to planner/cost/fitted.json

The residuals come from fitting.fit (leave one model out: every parameter refitted without
that model's rows, all engines; leave one GPU out: the same per system). The bands the
planner draws around every prediction are their 10th and 90th percentiles per engine and
weight format: where the measured value fell for 80% of the held-out predictions.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

FORMATS = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "int4_wo": "int4", "": "bf16",
           "bf16": "bf16"}  # fmt: skip


def summary(errs: list[tuple]) -> dict[str, float]:
    a = np.abs([e[1] for e in errs])
    t = np.abs([e[2] for e in errs if not math.isnan(e[2])])
    return {"rows": int(a.size), "median_abs_tpot_err": round(float(np.median(a)), 4),
            "within_25pct": round(float(np.mean(a <= 0.25)), 4),
            "median_abs_ttft_err": round(float(np.median(t)), 4) if t.size else math.nan}  # fmt: skip


def _band(e: np.ndarray) -> dict[str, float]:
    return {"q10": round(float(np.quantile(e, 0.1)), 4),
            "q90": round(float(np.quantile(e, 0.9)), 4),
            "median_abs": round(float(np.median(np.abs(e))), 4), "rows": int(e.size)}  # fmt: skip


def bands(errs: list[tuple]) -> dict[str, dict]:
    """Per "engine/format" (and "engine/*"): q10 / q90 of TPOT and TTFT residuals."""
    by: dict[str, list[tuple]] = defaultdict(list)
    for r, te, fe in errs:
        by[f"{r.engine}/{FORMATS.get(r.quant, r.quant)}"].append((te, fe))
        by[f"{r.engine}/*"].append((te, fe))
    out = {}
    for k in sorted(by):
        tpot = np.array([x[0] for x in by[k]])
        ttft = np.array([x[1] for x in by[k] if not math.isnan(x[1])])
        out[k] = {"tpot": _band(tpot), **({"ttft": _band(ttft)} if ttft.size else {})}
    return out
