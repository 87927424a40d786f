"""Calibrated mode on the measured Blackwell fixture: does a host's own sweep make the model
better on what it did not measure?

    .venv/bin/python benchmarks/calibration_accuracy.py [--lomo]

The fixture holds one model at several layouts on one GPU type: exactly the user's case.

- **leave one layout out**: for every (engine, model, format, GPU) with two or more layouts,
  calibrate (planner.cost.calibrate.calibrate, what the CLIs and pages call) on one
  layout's points and predict every other layout's; median |TPOT error| per (measured TP ->
  predicted TP) class, uncalibrated -> calibrated;
- **from the lowest concurrency**: calibrate on each sweep's lowest-concurrency point and
  predict the same sweep's higher concurrencies; also over the sweeps the model misjudges
  (uncalibrated median |error| above 15%).

``--lomo``: the uncalibrated model is the fit without the row's model (every parameter
refitted, as a user's unseen model meets it; tens of minutes); default: the shipped fit
(in-sample: the harder test, little host bias is left to correct). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitting import fit, fixture  # noqa: E402
from fitting.rows import Row  # noqa: E402
from planner.cost.calibrate import Measured, calibrate  # noqa: E402
from planner.cost.calibrate_fit import Point, log_errors  # noqa: E402
from planner.cost.params import FITTED, ServingParams  # noqa: E402
from planner.cost.types import ServeLayout  # noqa: E402
from planner.errors import PlannerInputError  # noqa: E402

MISJUDGED = 0.15
MIN_CLASS = 20


def measured(r: Row) -> Measured:
    return Measured(r.layout, r.isl, r.osl, r.concurrency, r.tpot_ms, r.engine,
                    r.ttft_ms or None, fixture.workload_for(r))  # fmt: skip


def errors(rows: list[Row], p: ServingParams) -> np.ndarray:
    """|predicted / measured - 1| per row (NaN where the model cannot run it)."""
    r0 = rows[0]
    pts = [Point(r.layout, fixture.workload_for(r), r.concurrency, r.tpot_ms) for r in rows]
    return np.abs(np.expm1(log_errors(fixture.model_for(r0), fixture.host_for(r0), pts, p, None)))


def calibrated(r: Row, pts: list[Measured], base: ServingParams,
               target: ServeLayout) -> tuple[ServingParams, bool]:  # fmt: skip
    """The parameters calibrate() hands a prediction of ``target``, and whether its TPOT
    factors are applied (the fit's where the model runs none of the points' layouts)."""
    try:
        cal = calibrate(fixture.model_for(r), fixture.host_for(r), pts, base=base)
    except PlannerInputError:
        return base, False
    return cal.params_for(target), cal.applied


def hosts(rows: list[Row]) -> dict[tuple, list[Row]]:
    by: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        by[(r.engine, r.model_path, r.quant, r.system)].append(r)
    return by


def leave_one_layout_out(rows: list[Row], base_for) -> dict[tuple[int, int], list[tuple]]:
    out: dict[tuple[int, int], list[tuple]] = defaultdict(list)
    applied = total = 0
    for key, hr in hosts(rows).items():
        lays = list(dict.fromkeys(r.layout for r in hr))
        if len(lays) < 2:
            continue
        base = base_for(key[1])
        for src in lays:
            pts = [measured(r) for r in hr if r.layout == src]
            total += 1
            for dst in lays:
                if dst == src:
                    continue
                params, used = calibrated(hr[0], pts, base, dst)
                target = [r for r in hr if r.layout == dst]
                for b, a in zip(errors(target, base), errors(target, params), strict=True):
                    if b == b and a == a:
                        out[(src.tp, dst.tp)].append((b, a))
            applied += used
    print(f"leave one layout out: {total} calibrations, {applied} applied")
    return out


def from_lowest(rows: list[Row], base_for) -> list[tuple[float, float, float, str, int, float]]:
    """(uncalibrated, calibrated, sweep's uncalibrated median, engine, sweep number,
    uncalibrated error at the lowest concurrency) per higher-concurrency point of every sweep
    (one layout, one workload as launched)."""
    out = []
    sweeps: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        sweeps[(r.engine, r.model_path, r.quant, r.system, r.layout, fixture.workload_for(r))
               ].append(r)  # fmt: skip
    for n, (key, sr) in enumerate(sweeps.items()):
        low = min(r.concurrency for r in sr)
        rest = [r for r in sr if r.concurrency > low]
        if not rest:
            continue
        base = base_for(key[1])
        lowest = [r for r in sr if r.concurrency == low]
        first = [measured(r) for r in lowest]
        b, a = errors(rest, base), errors(rest, calibrated(sr[0], first, base, key[4])[0])
        ok = (b == b) & (a == a)
        med = float(np.median(b[ok])) if ok.any() else np.nan
        e0 = float(np.nanmedian(errors(lowest, base)))
        out += [(x, y, med, key[0], n, e0) for x, y in zip(b[ok], a[ok], strict=True)]
    return out


def lomo_params(rows: list[Row], saved: Path | None = None):
    """The fit without each model (``saved``: a JSON of them, read if there, else written)."""
    cache: dict[str, ServingParams] = {}
    if saved is not None and saved.is_file():
        cache = {m: ServingParams(**v) for m, v in json.loads(saved.read_text()).items()}

    def base_for(model: str) -> ServingParams:
        if model not in cache:
            cache[model] = fit.fit_all([r for r in rows if r.model_path != model])
            if saved is not None:
                saved.write_text(json.dumps({m: asdict(p) for m, p in cache.items()}))
        return cache[model]

    return base_for


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lomo", action="store_true", help="uncalibrated = the fit without the "
                    "row's model (slow)")  # fmt: skip
    ap.add_argument("--lomo-cache", type=Path, help="JSON of those fits: read if there, else "
                    "written (they take tens of minutes)")  # fmt: skip
    args = ap.parse_args()
    if not fixture.CSV.is_file():
        print(f"skipped: {fixture.CSV} absent")
        return 0
    print(f"machine: {platform.node()}, Python {platform.python_version()}; baseline: "
          f"{'fit without the model' if args.lomo else 'the shipped fit'}")  # fmt: skip
    rows, _ = fixture.load_rows()
    base_for = lomo_params(rows, args.lomo_cache) if args.lomo else (lambda _m: FITTED)
    classes = leave_one_layout_out(rows, base_for)
    print("\n| measured TP -> predicted TP | points | uncalibrated | calibrated |")
    print("|---|---:|---:|---:|")
    every = []
    for (s, d), pairs in sorted(classes.items()):
        b, a = np.array(pairs).T
        every += pairs
        flag = "" if len(pairs) >= MIN_CLASS else " (under 20 points)"
        print(f"| TP={s} -> TP={d}{flag} | {len(pairs)} | {np.median(b):.2%} | {np.median(a):.2%} |")
    b, a = np.array(every).T
    print(f"| all | {len(every)} | {np.median(b):.2%} | {np.median(a):.2%} |")
    pts = from_lowest(rows, base_for)
    print("\n| from the lowest concurrency | points | uncalibrated | calibrated |")
    print("|---|---:|---:|---:|")
    for name, keep in [("all", lambda x: True), *[(e, lambda x, e=e: x[3] == e) for e in
                        ("vllm", "sglang", "trtllm")],
                       (f"sweeps misjudged by over {MISJUDGED:.0%}", lambda x: x[2] > MISJUDGED)]:  # fmt: skip
        sel = np.array([x[:2] for x in pts if keep(x)])
        print(f"| {name} | {len(sel)} | {np.median(sel[:, 0]):.2%} | {np.median(sel[:, 1]):.2%} |")
    per: dict[int, list[tuple]] = defaultdict(list)
    for x in pts:
        per[x[4]].append(x)
    change = [np.median([x[1] for x in v]) - np.median([x[0] for x in v]) for v in per.values()]
    print(f"\nper sweep, median over its higher concurrencies: {sum(c < 0 for c in change)} of "
          f"{len(change)} sweeps better, {sum(c > 0 for c in change)} worse (worst "
          f"{max(change):+.1%} points)")  # fmt: skip
    for name, sel in (("worse", [v for v, c in zip(per.values(), change, strict=True) if c > 0]),
                      ("better", [v for v, c in zip(per.values(), change, strict=True) if c < 0])):
        print(f"  {name} sweeps: median uncalibrated |error| {np.median([v[0][2] for v in sel]):.1%}"
              f" over the higher concurrencies, {np.median([v[0][5] for v in sel]):.1%} at the "
              "lowest (the one point calibrated on)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
