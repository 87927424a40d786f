"""Which change-point library `collectors check` uses: detection quality on generated
histories, speed, import cost and dependency weight, one library per virtual env.

Apache Otava 0.8.0 pins numpy 2.2.0 and signal-processing-algorithms 2.1.6 needs numpy < 2,
so neither installs beside this project's numpy 2.4.6: each runs in its own env.

    python3 -m venv /tmp/cmp-otava && /tmp/cmp-otava/bin/pip install apache-otava==0.8.0
    python3 -m venv /tmp/cmp-spa && /tmp/cmp-spa/bin/pip install signal-processing-algorithms==2.1.6
    /tmp/cmp-otava/bin/python benchmarks/check_detectors.py otava
    /tmp/cmp-spa/bin/python benchmarks/check_detectors.py e-divisive
    .venv/bin/python benchmarks/check_detectors.py ruptures-rbf ruptures-binseg-l1

Every detector proposes the change points inside the same pipeline (analysis.regress.shifts:
outliers set aside, points settled, levels closer than 5% merged, as `check --min-change 5%`
does), so the table compares what a user would be told. Times are medians of fresh calls
of that whole pipeline on one core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analysis import regress  # noqa: E402 - after the path, for a plain `python benchmarks/...`

Detector = Callable[[np.ndarray, int], list[int]]  # analysis.regress.Detector


def _otava(x: np.ndarray, _min_runs: int) -> list[int]:
    from otava.analysis import compute_change_points

    found, _ = compute_change_points(list(x), window_len=50, max_pvalue=0.001)  # its defaults
    return [cp.index for cp in found]


def _e_divisive(x: np.ndarray, _min_runs: int) -> list[int]:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    np.random.seed(0)  # its permutation test draws from numpy's global generator
    return sorted(e_divisive(x, pvalue=0.05, permutations=100))  # its defaults


def _binseg_l1(x: np.ndarray, min_runs: int) -> list[int]:
    import ruptures

    if len(x) < 2 * min_runs:
        return []
    z = (x / np.median(x) - 1.0) / regress.noise_scale(x)
    ends = (
        ruptures.Binseg(model="l1", min_size=min_runs, jump=1)
        .fit(z)
        .predict(pen=1.0 * np.log(len(x)))
    )
    return [int(e) for e in ends[:-1]]


def _rbf(gamma: float, per_ln_n: float) -> Detector:
    """regress.candidates with other constants (the --scan that chose them)."""

    def detect(x: np.ndarray, min_runs: int) -> list[int]:
        import ruptures

        if len(x) < 2 * min_runs:
            return []
        z = (x / np.median(x) - 1.0) / regress.noise_scale(x)
        algo = ruptures.KernelCPD(kernel="rbf", min_size=min_runs, params={"gamma": gamma})
        return [
            int(e) for e in algo.fit(z.reshape(-1, 1)).predict(pen=per_ln_n * np.log(len(x)))[:-1]
        ]

    return detect


def scan(seeds: int) -> None:
    """RBF width x penalty: raw false change points in flat histories (30 and 300 runs),
    and exact hits of +12% at run 20 under 5% noise through the pipeline."""
    flat30, flat300 = Scenario("flat", 30, 0.02), Scenario("flat", 300, 0.02)
    noisy = Scenario("noisy step", 30, 0.05, ((19, 0.12),))
    for gamma in (0.05, 0.1, 0.3, 1.0):
        for k in (0.25, 0.5, 1.0, 2.0):
            d = _rbf(gamma, k)
            rng = np.random.default_rng(5)
            f30 = sum(len(d(history(flat30, rng), regress.MIN_RUNS)) for _ in range(seeds))
            f300 = sum(len(d(history(flat300, rng), regress.MIN_RUNS)) for _ in range(seeds // 4))
            hit = score(d, noisy, seeds, raw=False)["exact"]
            print(f"gamma {gamma:<5} pen {k:<4} x ln n: flat false/history 30 runs "
                  f"{f30 / seeds:.3f}, 300 runs {f300 / (seeds // 4):.3f}; 5%-noise step exact {hit:.2f}",
                  flush=True)  # fmt: skip


DETECTORS: dict[str, tuple[str, str, Detector]] = {
    "otava": ("apache-otava", "otava.analysis", _otava),
    "e-divisive": (
        "signal-processing-algorithms",
        "signal_processing_algorithms.energy_statistics.energy_statistics",
        _e_divisive,
    ),  # fmt: skip
    "ruptures-rbf": ("ruptures", "ruptures", regress.candidates),  # what check uses
    "ruptures-binseg-l1": ("ruptures", "ruptures", _binseg_l1),
}


@dataclass(frozen=True)
class Scenario:
    name: str
    n: int
    cv: float  # noise: standard deviation relative to the level
    steps: tuple[tuple[int, float], ...] = ()  # (first index of the new level, relative move)
    outlier: float | None = None  # one run this much off, at a random index
    heavy: bool = False  # Student-t (3 dof) noise instead of Gaussian


SCENARIOS = (
    Scenario("flat, 2% noise", 30, 0.02),
    Scenario("+12% at run 20, 2% noise", 30, 0.02, ((19, 0.12),)),
    Scenario("+12% at run 20, 2% heavy-tailed", 30, 0.02, ((19, 0.12),), heavy=True),
    Scenario("+12% at run 20, 5% noise", 30, 0.05, ((19, 0.12),)),
    Scenario("one +30% outlier, 2% noise", 30, 0.02, outlier=0.30),
    Scenario("-12% at run 20 (an improvement)", 30, 0.02, ((19, -0.12),)),
    Scenario("+12% at run 20 and a +30% outlier", 30, 0.02, ((19, 0.12),), outlier=0.30),
    Scenario("+12% at run 28 (3 runs after)", 30, 0.02, ((27, 0.12),)),
    Scenario("1,000 runs: +8% at 300, -8% at 700", 1000, 0.02, ((300, 0.08), (700, -0.08))),
)


def history(s: Scenario, rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_t(3, s.n) / np.sqrt(3) if s.heavy else rng.standard_normal(s.n)
    x = 100.0 * (1.0 + s.cv * noise)
    for at, move in s.steps:
        x[at:] *= 1.0 + move
    if s.outlier is not None:
        x[int(rng.integers(0, s.n))] *= 1.0 + s.outlier
    return x


def found_by(detect: Detector, x: np.ndarray, raw: bool) -> list[int]:
    """Where the pipeline finds moves; ``raw``: the library's points with the merge alone."""
    if raw:
        found = regress.merge_small(x, detect(x, regress.MIN_RUNS), regress.MIN_CHANGE)
    else:
        found = regress.shifts(x, detect=detect)
    return [sh.index for sh in found]


def score(detect: Detector, s: Scenario, seeds: int, raw: bool) -> dict:
    """Share of histories where exactly the true steps were found (at their run), where
    each was found within one run, and false change points per history."""
    rng = np.random.default_rng(7)
    exact = near = false = 0
    truth = [at for at, _ in s.steps]
    for _ in range(seeds):
        x = history(s, rng)
        found = found_by(detect, x, raw)
        exact += found == truth
        near += all(any(abs(f - t) <= 1 for f in found) for t in truth)
        false += sum(1 for f in found if all(abs(f - t) > 1 for t in truth))
    return {"exact": exact / seeds, "within_1": near / seeds, "false_per_history": false / seeds}


def walk(detect: Detector, seeds: int, raw: bool) -> float:
    """Share of +12%-at-run-20 histories that a nightly check reports right every night:
    nothing on nights 6-21, then a move at run 20 on nights 22-30 (three runs at the level)."""
    rng = np.random.default_rng(11)
    clean = 0
    for _ in range(seeds):
        x = history(SCENARIOS[1], rng)
        clean += all((found_by(detect, x[:night], raw)[-1:] or [None])[0]
                     == (19 if night >= 19 + regress.MIN_RUNS else None)
                     for night in range(6, 31))  # fmt: skip
    return clean / seeds


def speed_ms(detect: Detector, n: int, repeat: int) -> float:
    rng = np.random.default_rng(3)
    x = history(Scenario("speed", n, 0.02, ((n // 2, 0.1),)), rng)
    regress.shifts(x, detect=detect)  # the first call imports the library
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        regress.shifts(x, detect=detect)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def import_ms(module: str, repeat: int = 5) -> float:
    """Median extra wall time of importing ``module`` in a fresh process that already has
    numpy (the dashboard and `check` have it, with pandas, before they detect)."""
    code = ("import time, numpy; t = time.perf_counter(); import {m}; "
            "print((time.perf_counter() - t) * 1000)")  # fmt: skip
    runs = [float(subprocess.run([sys.executable, "-c", code.format(m=module)], check=True,
                                 capture_output=True, text=True).stdout)
            for _ in range(repeat)]  # fmt: skip
    return statistics.median(runs)


def dependencies(dist: str) -> tuple[list[str], float]:
    """Distributions ``dist`` pulls in (itself included, numpy excluded: every candidate and
    this project have it), and their installed size in MB."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [dist]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen or name == "numpy":
            continue
        try:
            d = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = d
        for req in d.requires or []:
            if "extra ==" in req:
                continue
            if ";" in req and "python_version" in req:
                try:
                    from packaging.markers import Marker
                except ImportError:  # a bare env: pip's own copy
                    from pip._vendor.packaging.markers import Marker

                if not Marker(req.split(";", 1)[1]).evaluate():
                    continue
            todo.append(req.split(";")[0].split("[")[0].split("<")[0].split(">")[0]
                        .split("=")[0].split("!")[0].split("~")[0].strip())  # fmt: skip
    size = sum((f.locate().stat().st_size for d in seen.values() for f in d.files or []
                if f.locate().exists()), 0)  # fmt: skip
    return sorted(seen), size / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("detectors", nargs="*", help=f"any of {', '.join(sorted(DETECTORS))}")
    parser.add_argument("--scan", action="store_true",
                        help="scan the RBF width and penalty analysis/regress.py uses")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=200, help="histories per scenario")
    parser.add_argument("--raw", action="store_true",
                        help="the library's change points with the merge alone (no outlier "
                        "filter, no settling)")  # fmt: skip
    parser.add_argument("--out", type=Path, help="append one JSON line per detector here")
    args = parser.parse_args(argv)
    if unknown := set(args.detectors) - set(DETECTORS):
        parser.error(f"unknown detector(s): {', '.join(sorted(unknown))}")
    if args.scan:
        scan(args.seeds)
    for name in args.detectors:
        dist, module, detect = DETECTORS[name]
        result = {"detector": name, "raw": args.raw, "version": metadata.version(dist),
                  "numpy": metadata.version("numpy"), "scenarios": {}}  # fmt: skip
        for s in SCENARIOS:
            seeds = args.seeds if s.n <= 100 else max(args.seeds // 40, 5)
            result["scenarios"][s.name] = score(detect, s, seeds, args.raw)
            print(name, s.name, result["scenarios"][s.name], flush=True)
        result["nightly_walk_clean"] = walk(detect, max(args.seeds // 4, 5), args.raw)
        result["ms_30"] = speed_ms(detect, 30, 50)
        result["ms_1000"] = speed_ms(detect, 1000, 5)
        result["import_ms"] = import_ms(module)
        result["deps"], result["deps_mb"] = dependencies(dist)
        print(json.dumps(result), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
