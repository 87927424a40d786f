"""Calibrated mode on the measured Blackwell fixture: does a host's own sweep make the model
better on what it did not measure?

    .venv/bin/python benchmarks/calibration_accuracy.py [--held-out model|gpu --cache FILE]
        [--lowest K]

The fixture holds one model at several layouts on one GPU type: exactly the user's case.

- **leave one layout out**: for every (engine, model, format, GPU) with two or more layouts,
  calibrate (planner.cost.calibrate.calibrate, what the CLIs and pages call) on one
  layout's points and predict every other layout's; median |TPOT error| per (measured TP ->
  predicted TP) class, uncalibrated -> calibrated;
- **from the lowest concurrency**: calibrate on each sweep's lowest-concurrency point and
  predict the same sweep's higher concurrencies; also over the sweeps the model misjudges
  (uncalibrated median |error| above 15%). ``--lowest K``: on its K lowest concurrencies
  (a sweep's bottom, extrapolated upward; the check holds the top third of them back).

``--held-out model``: the uncalibrated model is the fit without the row's model (every
parameter refitted, as a user's unseen model meets it; ~12 min); ``--held-out gpu``: without
the row's GPU (B200 or B300: a host the fit never saw, judged by its spec sheet; ~3 min);
default: the shipped fit (in-sample: the harder test, little host bias is left to correct).
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
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
    return np.abs(signed(rows, p))


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
    for hr in hosts(rows).values():
        lays = list(dict.fromkeys(r.layout for r in hr))
        if len(lays) < 2:
            continue
        base = base_for(hr[0])
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


@dataclass(frozen=True)
class Higher:
    """One higher-concurrency point of a sweep calibrated on its lowest concurrency."""

    before: float  # |TPOT error|, uncalibrated
    after: float  # the same, calibrated
    sweep: int
    sweep_median: float  # the sweep's uncalibrated median over its higher concurrencies
    engine: str
    system: str
    model: str
    concurrency: int
    toward: float  # after a tiny move toward the lowest point's error: the floor's test
    applied: bool  # whether the calibration was applied (one point: outside the model's band)
    lowest: float  # the sweep's evidence: its lowest point's predicted / measured - 1
    what: str  # the sweep: layout, workload and lowest concurrency


def from_lowest(rows: list[Row], base_for, k: int = 1) -> tuple[list[Higher], int]:
    """Every higher-concurrency point of every sweep (one layout, one workload as launched)
    calibrated on its ``k`` lowest concurrencies, and how many sweeps are left out because the
    model cannot run their lowest point."""
    out: list[Higher] = []
    refused = 0
    sweeps: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        sweeps[(r.engine, r.model_path, r.quant, r.system, r.layout, fixture.workload_for(r))
               ].append(r)  # fmt: skip
    for n, (key, sr) in enumerate(sweeps.items()):
        low = sorted({r.concurrency for r in sr})[:k]
        rest = [r for r in sr if r.concurrency > low[-1]]
        if not rest:
            continue
        base = base_for(sr[0])
        lowest = [r for r in sr if r.concurrency in low]
        e0 = signed(lowest, base)
        if not np.isfinite(e0).any():
            refused += 1
            continue
        first = [measured(r) for r in lowest]
        params, applied = calibrated(sr[0], first, base, key[4])
        s = signed(rest, base)
        b, a = np.abs(s), errors(rest, params)
        # the floor: a move of 0.1% toward the lowest point's error, at every higher point
        nudge = np.abs(s - 1e-3 * np.sign(np.nanmedian(e0)))
        ok = (b == b) & (a == a)
        med = float(np.median(b[ok])) if ok.any() else np.nan
        what = (f"{key[4].describe()} isl {key[5].isl} osl {key[5].osl} from concurrency "
                f"{low[0]}")  # fmt: skip
        out += [Higher(float(x), float(y), n, med, key[0], key[3], key[1].split("/")[-1],
                       r.concurrency, float(t), applied, float(np.nanmedian(e0)), what)
                for x, y, r, t in zip(b[ok], a[ok], np.array(rest)[ok], nudge[ok], strict=True)]  # fmt: skip
    return out, refused


def signed(rows: list[Row], p: ServingParams) -> np.ndarray:
    """predicted / measured - 1 per row (NaN where the model cannot run it)."""
    r0 = rows[0]
    pts = [Point(r.layout, fixture.workload_for(r), r.concurrency, r.tpot_ms) for r in rows]
    return np.expm1(log_errors(fixture.model_for(r0), fixture.host_for(r0), pts, p, None))


def _worse_classes(pts: list[Higher], key) -> tuple[int, list[tuple]]:
    """(classes of MIN_CLASS+ points, [(class, points, before, after, points better, points
    worse)] of those worse in median): the counts tell a median that one point moved across
    from a class where more points got worse than better."""
    by: dict = defaultdict(list)
    for x in pts:
        by[key(x)].append(x)
    big = {k: v for k, v in by.items() if len(v) >= MIN_CLASS}
    worse = []
    for k, v in sorted(big.items(), key=lambda kv: str(kv[0])):
        b, a = np.median([x.before for x in v]), np.median([x.after for x in v])
        if a > b:
            up = sum(x.after > x.before for x in v)
            down = sum(x.after < x.before for x in v)
            worse.append((k, len(v), b, a, down, up))
    return len(big), worse


def held_out_params(rows: list[Row], by: str, saved: Path | None = None):
    """The fit without each row's model or GPU (``saved``: a JSON of them, read if there,
    else written)."""
    key = (lambda r: r.model_path) if by == "model" else (lambda r: r.system)
    cache: dict[str, ServingParams] = {}
    if saved is not None and saved.is_file():
        cache = {m: ServingParams(**v) for m, v in json.loads(saved.read_text()).items()}

    def base_for(row: Row) -> ServingParams:
        k = key(row)
        if k not in cache:
            cache[k] = fit.fit_all([r for r in rows if key(r) != k])
            if saved is not None:
                saved.write_text(json.dumps({m: asdict(p) for m, p in cache.items()}))
        return cache[k]

    return base_for


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--held-out", choices=("model", "gpu"), help="uncalibrated = the fit "
                    "without the row's model or GPU (slow)")  # fmt: skip
    ap.add_argument("--cache", type=Path, help="JSON of those fits: read if there, else "
                    "written (they take minutes)")  # fmt: skip
    ap.add_argument("--lowest", type=int, default=1, metavar="K", help="calibrate each sweep "
                    "on its K lowest concurrencies (default 1)")  # fmt: skip
    args = ap.parse_args()
    if not fixture.CSV.is_file():
        print(f"skipped: {fixture.CSV} absent")
        return 0
    print(f"machine: {platform.node()}, Python {platform.python_version()}; baseline: "
          f"{f'fit without the {args.held_out}' if args.held_out else 'the shipped fit'}")  # fmt: skip
    rows, _ = fixture.load_rows()
    base_for = (held_out_params(rows, args.held_out, args.cache) if args.held_out
                else (lambda _r: FITTED))  # fmt: skip
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
    pts, refused = from_lowest(rows, base_for, args.lowest)
    what = ("the lowest concurrency" if args.lowest == 1 else
            f"the {args.lowest} lowest concurrencies")  # fmt: skip
    print(f"\nfrom {what} ({refused} sweeps left out: the model cannot run their lowest "
          "point)")  # fmt: skip
    print(f"\n| from {what} | points | uncalibrated | calibrated |")
    print("|---|---:|---:|---:|")
    for name, keep in [("all", lambda x: True), *[(e, lambda x, e=e: x.engine == e) for e in
                        ("vllm", "sglang", "trtllm")],
                       (f"sweeps misjudged by over {MISJUDGED:.0%}",
                        lambda x: x.sweep_median > MISJUDGED),
                       ("sweeps it was applied to", lambda x: x.applied)]:  # fmt: skip
        sel = [x for x in pts if keep(x)]
        print(f"| {name} | {len(sel)} | {np.median([x.before for x in sel]):.2%} | "
              f"{np.median([x.after for x in sel]):.2%} |")  # fmt: skip
    for what, key in (("concurrency", lambda x: x.concurrency),
                      ("engine and GPU", lambda x: (x.engine, x.system)),
                      ("engine, model and GPU", lambda x: (x.engine, x.model, x.system))):
        worse = _worse_classes(pts, key)
        print(f"per {what} ({MIN_CLASS}+ points): {len(worse[1])} of {worse[0]} classes worse"
              + "".join(f"; {k}: {b:.2%} -> {a:.2%} ({n}: {down} points better, {up} worse)"
                        for k, n, b, a, down, up in worse[1]))  # fmt: skip
    per: dict[int, list[Higher]] = defaultdict(list)
    for x in pts:
        per[x.sweep].append(x)
    change = {k: np.median([x.after for x in v]) - np.median([x.before for x in v])
              for k, v in per.items()}  # fmt: skip
    floor = sum(np.median([x.toward for x in v]) > np.median([x.before for x in v])
                for v in per.values())  # fmt: skip
    print(f"\nper sweep, median over its higher concurrencies: applied to "
          f"{sum(v[0].applied for v in per.values())}; {sum(c < 0 for c in change.values())}"
          f" of {len(change)} sweeps better, {sum(c > 0 for c in change.values())} worse (worst "
          f"{max(change.values()):+.1%} points)")  # fmt: skip
    print(f"  floor: in {floor} sweeps the higher concurrencies err the other way from the lowest"
          " (any move toward the lowest point's error makes their median worse)")  # fmt: skip
    for k, c in change.items():
        if c > 0:
            x = per[k][0]
            print(f"  worse: {x.engine} {x.model} {x.system} {x.what} (sweep {k}): "
                  f"{x.sweep_median:.1%} -> {x.sweep_median + c:.1%}")  # fmt: skip
            print(f"    {_twin(k, per, change)}")
    return 0


def _twin(k: int, per: dict[int, list[Higher]], change: dict[int, float]) -> str:
    """The sweep the calibration improved whose evidence (its lowest point's error) is
    nearest to sweep ``k``'s: a rule of that evidence alone moves both alike."""
    x = per[k][0]
    better = [j for j, c in change.items() if c < 0 and per[j][0].applied]
    if not better:
        return "no sweep the calibration improved to compare with"
    j = min(better, key=lambda j: abs(per[j][0].lowest - x.lowest))
    y = per[j][0]
    return (f"its lowest point {x.lowest:+.1%}; the improved sweep nearest in that evidence: "
            f"{y.engine} {y.model} {y.system} {y.what} (sweep {j}), lowest point "
            f"{y.lowest:+.1%}, {y.sweep_median:.1%} -> {y.sweep_median + change[j]:.1%}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
