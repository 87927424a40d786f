"""Fit the serving model's global parameters on the Blackwell fixture; leave-one-model-out.

    python -m fitting                      # fit: shared values on vLLM rows, then per engine
    python -m fitting --bands              # + leave-one-model-out bands per engine and format
    python -m fitting --bands --write      # ... and write them to planner/cost/fitted.json
    python -m fitting --calibration --write    # calibrated mode's spreads only (seconds)

Loss: mean |log(predicted / measured)| of TPOT, plus 0.2 x the same for TTFT (TTFT pins the
prefill efficiency that prefill interference also uses). Nelder-Mead on log-parameters in
plain numpy (no scipy in the project), from fixed starting values (several for each engine's
own fit), so the result is deterministic. Pure: reads only the fixture CSV and configs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fitting import calibration, fixture, holdout
from planner.cost import serving
from planner.cost.params import FITTED, FITTED_FILE, ServingParams
from planner.errors import PlannerInputError

# No engine's per-step overhead is fitted: vLLM's async scheduling, SGLang's overlap scheduler
# and TRT-LLM's overlap scheduler all prepare step n+1 on the CPU while the GPU runs step n
# (planner/specs/engines.py cites their defaults), so a step costs its kernels; the sampler is
# costed in the LM-head op.
FREE = ("bw_eff", "kernel_us", "expert_us", "mfu", "moe_mfu", "ttft_fixed_ms",
        "prompts_per_client")
# Per engine, on its own rows, the rest as fitted on vLLM: its request path and the
# fixture's benchmark protocol for that engine (prompts per concurrency slot).
ENGINE_FREE = ("ttft_fixed_ms", "prompts_per_client")
PER_ENGINE = ENGINE_FREE  # parameters that hold one value per engine
BOUNDS = {"bw_eff": (0.2, 0.92), "moe_eff": (0.2, 1.5), "kernel_us": (0.3, 30.0),
          "expert_us": (0.01, 30.0), "mfu": (0.05, 1.0), "moe_mfu": (0.02, 1.0), "ttft_fixed_ms": (0.0, 500.0),
          "prompts_per_client": (1.0, 100.0)}  # fmt: skip
TTFT_WEIGHT = 0.2
# Prompts per slot each engine's own fit starts from; it keeps the start with the lowest loss.
# Clipping at a bound leaves the objective flat beyond it, and a simplex that steps there
# stays: from 5 alone, SGLang's fit stopped at the bound 1 (loss 0.2802) though 1.5 is lower
# (0.2755).
ENGINE_STARTS = (1.5, 5.0, 10.0)


@dataclass
class Group:
    """Rows sharing model, host, layout and workload: one vectorised predict call."""

    rows: list[fixture.Row]
    model: object
    host: object
    workload: serving.Workload  # as the rows' launch script ran it (fitting.fixture)
    conc: np.ndarray
    tpot: np.ndarray
    ttft: np.ndarray


def groups(rows: list[fixture.Row]) -> list[Group]:
    by: dict[tuple, list[fixture.Row]] = defaultdict(list)
    for r in rows:
        by[(r.model_path, r.quant, r.system, r.layout, fixture.workload_for(r))].append(r)
    out = []
    for (*_, w), g in by.items():
        out.append(Group(g, fixture.model_for(g[0]), fixture.host_for(g[0]), w,
                         np.array([r.concurrency for r in g], dtype=float),
                         np.array([r.tpot_ms for r in g]), np.array([r.ttft_ms for r in g])))  # fmt: skip
    return out


def predict_groups(gs: list[Group], p: ServingParams) -> list[serving.Prediction | None]:
    out: list[serving.Prediction | None] = []
    for g in gs:
        r = g.rows[0]
        try:
            out.append(serving.predict(g.model, g.host, r.layout, g.workload, g.conc, p))
        except PlannerInputError:
            out.append(None)  # the model says it cannot run: counted apart, not fitted
    return out


def errors(gs: list[Group], p: ServingParams) -> list[tuple[fixture.Row, float, float]]:
    """(row, TPOT error, TTFT error) as predicted / measured - 1."""
    out = []
    for g, pr in zip(gs, predict_groups(gs, p), strict=True):
        if pr is None:
            continue
        for i, r in enumerate(g.rows):
            te = pr.ttft_ms[i] / r.ttft_ms - 1 if r.ttft_ms > 0 else math.nan
            out.append((r, float(pr.tpot_ms[i] / r.tpot_ms - 1), float(te)))
    return out


def _params(x: np.ndarray, base: ServingParams, engine: str, free: tuple[str, ...]):
    vals = {}
    for name, v in zip(free, np.exp(x), strict=True):
        lo, hi = BOUNDS[name]
        vals[name] = float(min(max(v, lo), hi))
    for name in PER_ENGINE:
        if name in vals:
            vals[name] = {**getattr(base, name), engine: vals[name]}
    return base.with_values(**vals)


def loss(gs: list[Group], p: ServingParams) -> float:
    e = errors(gs, p)
    if not e:
        return 1e9
    t = np.array([abs(math.log1p(x[1])) for x in e])
    f = np.array([abs(math.log1p(x[2])) for x in e if x[2] == x[2] and x[2] > -1])
    return float(t.mean() + TTFT_WEIGHT * (f.mean() if f.size else 0.0))


def nelder_mead(f, x0: np.ndarray, step: float = 0.3, iters: int = 240) -> np.ndarray:
    """Plain Nelder-Mead (standard coefficients), deterministic."""
    n = len(x0)
    pts = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    vals = [f(x) for x in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        cen = np.mean(pts[:-1], axis=0)
        xr = cen + (cen - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = cen + 2 * (cen - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = cen + 0.5 * (pts[-1] - cen)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (x - pts[0]) for x in pts[1:]]
                vals = [vals[0]] + [f(x) for x in pts[1:]]
        if max(vals) - min(vals) < 1e-6:
            break
    return pts[int(np.argmin(vals))]


def fit(rows: list[fixture.Row], engine: str = "vllm", base: ServingParams = FITTED,
        free: tuple[str, ...] = FREE, iters: int = 240,
        starts: tuple[float, ...] = ()) -> ServingParams:  # fmt: skip
    """Nelder-Mead from fixed starting values (the fit does not depend on FITTED); with
    ``starts``, from each of those prompts-per-slot values, keeping the lowest loss."""
    gs = groups([r for r in rows if r.engine == engine])
    f = lambda x: loss(gs, _params(x, base, engine, free))  # noqa: E731
    best, best_loss = None, math.inf
    for start in [_start(engine, k) for k in starts] or [ServingParams()]:
        x = nelder_mead(f, np.log([max(_value(start, n, engine), 1e-3) for n in free]), iters=iters)
        x = nelder_mead(f, x, step=0.1, iters=iters)  # restart: leaves a collapsed simplex
        if (value := f(x)) < best_loss:
            best, best_loss = x, value
    return _params(best, base, engine, free)


def _start(engine: str, prompts_per_client: float) -> ServingParams:
    d = ServingParams()
    return d.with_values(prompts_per_client={**d.prompts_per_client, engine: prompts_per_client})


def _value(p: ServingParams, name: str, engine: str) -> float:
    v = getattr(p, name)
    return float(v.get(engine, v["vllm"])) if isinstance(v, dict) else float(v)


def fit_all(rows: list[fixture.Row], iters: int = 240) -> ServingParams:
    """The shared parameters on the vLLM rows, then each other engine's own on its rows."""
    p = fit(rows, iters=iters)
    for engine in ("sglang", "trtllm"):
        if any(r.engine == engine for r in rows):
            p = fit(rows, engine, base=p, free=ENGINE_FREE, iters=max(iters // 4, 40),
                    starts=ENGINE_STARTS)  # fmt: skip
    return p


def leave_out(rows: list[fixture.Row], key: Callable[[fixture.Row], str],
              iters: int = 240) -> list[tuple]:  # fmt: skip
    """(row, TPOT error, TTFT error) of every row, predicted by a fit without its group."""
    out = []
    for k in sorted({key(r) for r in rows}):
        p = fit_all([r for r in rows if key(r) != k], iters=iters)
        out += errors(groups([r for r in rows if key(r) == k]), p)
    return out


def lomo(rows: list[fixture.Row], iters: int = 240) -> list[tuple]:
    """Leave one model out (all its engines and formats)."""
    return leave_out(rows, lambda r: r.model_path, iters)


def logo(rows: list[fixture.Row], iters: int = 240) -> list[tuple]:
    """Leave one GPU system out."""
    return leave_out(rows, lambda r: r.system, iters)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fitting", description=__doc__.split("\n")[0])
    ap.add_argument("--bands", action="store_true", help="also the leave-one-model-out bands "
                    "per engine and weight format (planner/cost/params.py BANDS)")  # fmt: skip
    ap.add_argument("--write", action="store_true", help="write the fitted values (and with "
                    "--bands the bands) to planner/cost/fitted.json, which the planner loads")  # fmt: skip
    ap.add_argument("--calibration", action="store_true", help="calibrated mode's spreads "
                    "(fitting.calibration) at the recorded fit; alone with --write it writes "
                    "only those")  # fmt: skip
    args = ap.parse_args(argv)
    rows, dropped = fixture.load_rows()
    if args.calibration and not args.bands:
        spreads = calibration.spreads(rows, FITTED)
        json.dump({"calibration": spreads}, sys.stdout, indent=1)
        print()
        if args.write:
            write_section("calibration", spreads)
        return 0
    p = fit_all(rows)
    fitted = {n: (getattr(p, n) if n in PER_ENGINE else _value(p, n, "vllm")) for n in FREE}
    out = {"dropped": dropped, "fitted": fitted,
           "in_sample": holdout.summary(errors(groups(rows), p))}  # fmt: skip
    if args.bands:
        held = lomo(rows)
        out["bands"] = holdout.bands(held)
        if args.calibration:
            out["calibration"] = calibration.spreads(rows, p, held)
    json.dump(out, sys.stdout, indent=1, default=float)
    print()
    if args.write:
        write_fitted(fitted, out.get("bands"))
        if "calibration" in out:
            write_section("calibration", out["calibration"])
    return 0


def _rounded(value: float) -> float:
    return float(f"{value:.4g}")


def write_section(name: str, value: dict, path: Path = FITTED_FILE) -> None:
    """Replace one section of the file the planner loads (the fit's values stay)."""
    doc = json.loads(path.read_text())
    doc[name] = value
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def write_fitted(fitted: dict, bands: dict | None, path: Path = FITTED_FILE) -> None:
    """Replace the fitted values (and bands, when given) in the file the planner loads."""
    doc = json.loads(path.read_text())
    doc["params"] = {k: ({e: _rounded(x) for e, x in v.items()} if isinstance(v, dict)
                         else _rounded(v)) for k, v in fitted.items()}  # fmt: skip
    if bands is not None:
        doc["bands"] = bands
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
