"""Fit the serving model's global parameters on the Blackwell fixture; leave-one-model-out.

    python -m fitting                      # fit: GPU values on every row, request path per engine
    python -m fitting --bands              # + leave-one-model-out bands per engine and format
    python -m fitting --bands --write      # ... and write them to planner/cost/fitted.json
    python -m fitting --calibration --write    # calibrated mode's spreads only (seconds)

Every row is predicted as serving.predict answers it: the benchmark simulated on the engine's
scheduler (planner.sched), each step priced by the cost model. The schedules do not depend on
the fitted values, so they are simulated once; each evaluation prices their aggregated step
shapes (serving_means.MeanPlan). Fitted: the GPU's parameters (FREE) on every engine's rows and
each engine's request path outside the GPU. Loss: mean |log(predicted / measured)| of TPOT,
plus 0.2 x the same for TTFT (TTFT pins the prefill efficiency). Nelder-Mead on
log-parameters in plain numpy (no scipy in the project), from fixed starting values, so the
result is deterministic. Pure: reads only the fixture CSV and configs.
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
from planner.cost import serving, serving_means
from planner.cost.params import FITTED, FITTED_FILE, ServingParams
from planner.errors import PlannerInputError

# What belongs to the GPU, shared by every engine: achieved bandwidth, per-kernel floor,
# grouped-GEMM overhead per expert, prefill tensor efficiency (dense and MoE). No engine's
# scheduling is fitted (planner.sched simulates it from source), nor a per-step CPU overhead:
# vLLM's async scheduling and SGLang's and TRT-LLM's overlap schedulers prepare step n + 1 on
# the CPU while the GPU runs step n.
FREE = ("bw_eff", "kernel_us", "expert_us", "mfu", "moe_mfu", "seq_us:vllm", "seq_us:sglang",
        "seq_us:trtllm", "engine_kernel:sglang", "engine_kernel:trtllm")
# Per engine: the request path outside the GPU (HTTP, tokenizer, detokenizer), a constant
# added to TTFT; for any GPU parameters the loss takes each engine's best constant
# (:func:`request_paths`), so the two are fitted together.
PER_ENGINE = ("ttft_fixed_ms", "seq_us", "engine_kernel")
BOUNDS = {"bw_eff": (0.2, 0.92), "moe_eff": (0.2, 1.5), "kernel_us": (0.3, 30.0),
          "expert_us": (0.01, 30.0), "seq_us": (0.001, 5.0), "mfu": (0.05, 1.0),
          "moe_mfu": (0.02, 1.0),
          "ttft_fixed_ms": (0.0, 500.0),
          "engine_kernel": (0.2, 5.0)}  # fmt: skip
TTFT_WEIGHT = 0.2
ENGINES = ("vllm", "sglang", "trtllm")
# An engine's own values (its kernels' floor and per-sequence cost, its request path) are
# fitted only on at least this many of its rows; with fewer (leave-one-GPU-out holds out all
# TensorRT-LLM's B200 rows but 2) it takes vLLM's, the reference: two rows would set them.
MIN_ENGINE_ROWS = 30


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
    plan: serving_means.MeanPlan | None = None  # its schedules, once simulated (None: not yet)
    refused: bool = False  # the model cannot run it (does not fit at the engine's rule)


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


def means(gs: list[Group], p: ServingParams) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Each group's mean TPOT and TTFT (serving.mean_latencies: the numbers predict gives,
    priced from each schedule's aggregated step shapes); None where the model cannot run."""
    for g in gs:
        if g.plan is None and not g.refused:
            try:
                g.plan = serving_means.mean_plan(g.model, g.host, g.rows[0].layout, g.workload, g.conc)
            except PlannerInputError:
                g.refused = True
    live = [g for g in gs if not g.refused]
    key = tuple(id(g) for g in live)
    cached = _STACKS.get(key)
    if cached is None:
        _STACKS.clear()  # one stack at a time: the fit's rows
        # The groups are kept with their stack: while they live no new group can take one of
        # their ids (a freed group's id reused by the next call's groups read its stack).
        cached = _STACKS[key] = (live, serving_means.MeanStack([g.plan for g in live]))
    stack = cached[1]
    got = iter(stack.evaluate(p) if live else [])
    return [None if g.refused else next(got) for g in gs]


_STACKS: dict[tuple, tuple[list[Group], serving_means.MeanStack]] = {}


def errors(gs: list[Group], p: ServingParams) -> list[tuple[fixture.Row, float, float]]:
    """(row, TPOT error, TTFT error) as predicted / measured - 1."""
    out = []
    for g, got in zip(gs, means(gs, p), strict=True):
        if got is None:
            continue
        tpot, ttft = got
        for i, r in enumerate(g.rows):
            te = ttft[i] / r.ttft_ms - 1 if r.ttft_ms > 0 else math.nan
            out.append((r, float(tpot[i] / r.tpot_ms - 1), float(te)))
    return out


def _params(x: np.ndarray, base: ServingParams, free: tuple[str, ...],
            tied: frozenset[str] = frozenset()) -> ServingParams:  # fmt: skip
    """``base`` with the free parameters at exp(x), clipped to BOUNDS; "name:engine" is one
    engine's value of a per-engine parameter; the ``tied`` engines take vLLM's."""
    vals: dict = {}
    for spec, v in zip(free, np.exp(x), strict=True):
        name, _, engine = spec.partition(":")
        lo, hi = BOUNDS[name]
        v = float(min(max(v, lo), hi))
        if engine:
            vals[name] = {**vals.get(name, getattr(base, name)), engine: v}
        else:
            vals[name] = v
    p = base.with_values(**vals)
    return _tie(p, tied) if tied else p


def _tie(p: ServingParams, tied: frozenset[str]) -> ServingParams:
    """``p`` with each of the ``tied`` engines' own values at vLLM's."""
    return p.with_values(**{n: {**getattr(p, n), **{e: getattr(p, n)["vllm"] for e in tied}}
                            for n in PER_ENGINE})  # fmt: skip


def thin_engines(rows: list[fixture.Row]) -> frozenset[str]:
    """Engines with fewer than MIN_ENGINE_ROWS rows: their own values are vLLM's."""
    n = {e: 0 for e in ENGINES}
    for r in rows:
        n[r.engine] = n.get(r.engine, 0) + 1
    return frozenset(e for e, k in n.items() if e != "vllm" and k < MIN_ENGINE_ROWS)


def _get(p: ServingParams, spec: str) -> float:
    name, _, engine = spec.partition(":")
    v = getattr(p, name)
    return float(v[engine]) if engine else float(v)


def request_paths(gs: list[Group], p: ServingParams) -> tuple[dict[str, float], float]:
    """Each engine's request path (the constant minimising its mean |log TTFT ratio|, within
    BOUNDS) at the GPU parameters ``p``, and the loss: mean |log(predicted / measured)| of
    TPOT plus TTFT_WEIGHT x the same for TTFT, per engine weighted by its rows."""
    tp: list[float] = []
    by: dict[str, tuple[list[float], list[float]]] = {}
    for g, got in zip(gs, means(gs, p.with_values(ttft_fixed_ms=ZERO_PATH)), strict=True):
        if got is None:
            continue
        tpot, ttft = got
        tp += list(np.abs(np.log(tpot / g.tpot)))
        ok = g.ttft > 0
        pred, meas = by.setdefault(g.workload.engine, ([], []))
        pred += list(ttft[ok])
        meas += list(g.ttft[ok])
    if not tp:
        return dict(p.ttft_fixed_ms), 1e9
    paths, ttft_loss, n = dict(p.ttft_fixed_ms), 0.0, 0
    for engine, (pred, meas) in by.items():
        paths[engine], value = best_constant(np.array(pred), np.array(meas))
        ttft_loss += value * len(pred)
        n += len(pred)
    return paths, float(np.mean(tp) + TTFT_WEIGHT * (ttft_loss / n if n else 0.0))


ZERO_PATH = {e: 0.0 for e in ENGINES}


def best_constant(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    """The constant c in BOUNDS minimising mean |log((pred + c) / meas)|, and that mean:
    a grid, then a finer one around its best."""
    lo, hi = BOUNDS["ttft_fixed_ms"]
    grid = np.linspace(lo, hi, 251)
    for _ in range(2):
        cost = np.abs(np.log((pred[None, :] + grid[:, None]) / meas[None, :])).mean(axis=1)
        i = int(np.argmin(cost))
        step = grid[1] - grid[0]
        grid = np.linspace(max(grid[i] - step, lo), min(grid[i] + step, hi), 41)
    cost = np.abs(np.log((pred[None, :] + grid[:, None]) / meas[None, :])).mean(axis=1)
    i = int(np.argmin(cost))
    return float(grid[i]), float(cost[i])


def loss(gs: list[Group], p: ServingParams) -> float:
    """The fit's objective at GPU parameters ``p`` (the request paths at their best)."""
    return request_paths(gs, p)[1]


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


def fit(rows: list[fixture.Row], base: ServingParams = FITTED, free: tuple[str, ...] = FREE,
        iters: int = 240) -> ServingParams:  # fmt: skip
    """Nelder-Mead on the GPU parameters over every engine's rows, from fixed starting
    values (the fit does not depend on FITTED), with each engine's request path at its best
    for them; returns both."""
    gs = groups(rows)
    means(gs, base)  # simulate every schedule once, outside the search
    tied = thin_engines(rows)
    free = tuple(n for n in free if n.partition(":")[2] not in tied)
    f = lambda x: loss(gs, _params(x, base, free, tied))  # noqa: E731
    start = ServingParams()
    x = nelder_mead(f, np.log([max(_get(start, n), 1e-3) for n in free]), iters=iters)
    x = nelder_mead(f, x, step=0.1, iters=iters)  # restart: leaves a collapsed simplex
    p = _params(x, base, free, tied)
    paths, _ = request_paths(gs, p)
    paths = {e: paths.get(e, FITTED.ttft_fixed_ms[e]) for e in ENGINES}
    return _tie(p.with_values(ttft_fixed_ms=paths), tied)


def _value(p: ServingParams, name: str, engine: str) -> float:
    v = getattr(p, name)
    return float(v.get(engine, v["vllm"])) if isinstance(v, dict) else float(v)


def fit_all(rows: list[fixture.Row], iters: int = 240) -> ServingParams:
    """The GPU parameters and each engine's request path (:func:`fit`)."""
    return fit(rows, iters=iters)


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
    fitted = {n: (getattr(p, n) if n in PER_ENGINE else _value(p, n, "vllm"))
              for n in dict.fromkeys(f.partition(":")[0] for f in (*FREE, *PER_ENGINE))}  # fmt: skip
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
