"""The benchmark client: which prompts it sends, how long they are, and how it measures them.

Every tool here runs the same closed loop: N prompts, at most C in flight, a new request sent
as soon as one finishes (``--request-rate inf``: all C at t = 0), streaming. They differ in
how the random dataset draws lengths and in N's default:

- **inferencex** (the fixture's: SemiAnalysisAI/InferenceX@000e6326
  benchmarks/benchmark_lib.sh ``run_benchmark_serving``: ``--num-prompts`` 10 x C,
  ``--random-range-ratio`` 0.8, ``--ignore-eos``; utils/bench_serving/benchmark_serving.py
  ``sample_random_requests``: lengths uniform integers in [int(L x r), L]).
- **vllm** (vllm-project/vllm@v0.34.0 vllm/benchmarks/datasets/datasets.py ``RandomDataset``:
  uniform in [floor(L(1 - r)), ceil(L(1 + r))], r = 0 by default, so a fixed L;
  ``--num-prompts`` 1000; ``ignore_eos`` for random data).
- **sglang** (sgl-project/sglang@v0.5.23 python/sglang/benchmark/datasets/common.py
  ``compute_random_lens``: uniform in [max(int(L r), 1), L], r = 0 by default, so [1, L];
  ``--num-prompts`` 1000; ``ignore_eos`` on by default).

Lengths are drawn from a two-dimensional Kronecker sequence (input and output independent and
evenly spread), so a prediction is deterministic and needs no seed.

Per request, as vllm/benchmarks/serve.py ``calculate_metrics`` (and InferenceX's copy, and
TRT-LLM's serve/scripts/benchmark_serving.py, derived from it) compute them: TTFT = first
token - send; E2EL = last token - send; TPOT = (E2EL - TTFT) / (output - 1), for outputs
longer than one token; ITL = the gaps between tokens. Percentiles are ``np.percentile``
(linear interpolation) over the requests; the means are plain means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError

# Kronecker steps 1 / rho and 1 / rho^2 (rho the plastic number: Roberts' R2 sequence), so
# the (input, output) pairs cover the unit square evenly for any N.
_STEP_IN, _STEP_OUT = 0.7548776662466927, 0.5698402909980532


@dataclass(frozen=True)
class Bench:
    name: str
    range_ratio: float  # the tool's --random-range-ratio default
    prompts_per_slot: int  # default --num-prompts = this x C (0: a fixed count)
    default_prompts: int  # default --num-prompts when not per slot

    def bounds(self, length: int, ratio: float) -> tuple[int, int]:
        """The smallest and largest length the tool draws for --random-*-len ``length``."""
        if self.name == "vllm":
            lo, hi = math.floor(length * (1 - ratio)), math.ceil(length * (1 + ratio))
        elif self.name == "sglang":
            lo, hi = max(int(length * ratio), 1), length
        else:  # inferencex
            lo, hi = int(length * ratio), length
        return max(lo, 1), max(hi, 1)

    def prompts(self, clients: int, num_prompts: int) -> int:
        """N: ``--num-prompts`` as given, else the tool's default for C clients."""
        if num_prompts:
            return num_prompts
        return self.prompts_per_slot * clients if self.prompts_per_slot else self.default_prompts


BENCHES: dict[str, Bench] = {
    "inferencex": Bench("inferencex", 0.8, 10, 0),
    "vllm": Bench("vllm", 0.0, 0, 1000),
    "sglang": Bench("sglang", 0.0, 0, 1000),
}
DEFAULT_BENCH = "inferencex"


def bench(name: str) -> Bench:
    if name not in BENCHES:
        raise PlannerInputError(f"--bench {name!r}: one of {', '.join(BENCHES)}")
    return BENCHES[name]


def check_ratio(b: Bench, ratio: float) -> None:
    """One clear line for a range ratio the tool refuses."""
    limit_ok = 0.0 <= ratio < 1.0 if b.name == "vllm" else 0.0 <= ratio <= 1.0
    if not limit_ok:
        raise PlannerInputError(f"--range-ratio {ratio:g}: {b.name} takes "
                                + ("0 <= r < 1" if b.name == "vllm" else "0 <= r <= 1"))


def lengths(b: Bench, isl: int, osl: int, ratio: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Input and output lengths of the n requests, in the order the client sends them."""
    k = np.arange(n, dtype=float) + 0.5
    out = []
    for length, step in ((isl, _STEP_IN), (osl, _STEP_OUT)):
        lo, hi = b.bounds(length, ratio)
        u = (k * step) % 1.0
        out.append(np.minimum(lo + np.floor(u * (hi - lo + 1)), hi).astype(np.int64))
    return out[0], out[1]


def mean_lengths(b: Bench, isl: int, osl: int, ratio: float) -> tuple[float, float]:
    """The mean input and output length the tool draws."""
    (li, hi), (lo, ho) = b.bounds(isl, ratio), b.bounds(osl, ratio)
    return (li + hi) / 2.0, (lo + ho) / 2.0


def client_text(name: str, isl: int, osl: int, ratio: float, num_prompts: int) -> str:
    """How an assumptions list names the benchmark client."""
    b = bench(name)
    r = b.range_ratio if ratio < 0 else ratio
    (li, hi), (lo, ho) = b.bounds(isl, r), b.bounds(osl, r)
    lens = (f"{isl} in / {osl} out" if (li, lo) == (hi, ho) else
            f"inputs uniform in [{li}, {hi}], outputs in [{lo}, {ho}] tokens")  # fmt: skip
    n = (f"{num_prompts} prompts" if num_prompts else
         f"{b.prompts_per_slot} x C prompts" if b.prompts_per_slot else
         f"{b.default_prompts} prompts")  # fmt: skip
    tool = {"inferencex": "InferenceX benchmark_serving.py (the fit's runs)",
            "vllm": "vllm bench serve", "sglang": "sglang bench_serving"}[b.name]  # fmt: skip
    return (f"{tool}, random dataset: {lens}, {n}, at most C in flight (all C at once, each "
            "finished request replaced); the engine's scheduler simulated step by step")


PERCENTILES = (50, 90, 99)


def percentiles(values: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """p50 / p90 / p99 as ``np.percentile`` gives them over the requests (linear
    interpolation); ``weights``: how many measured requests each simulated one stands for.
    numpy's own arithmetic (numpy/lib/_function_base_impl.py ``_quantile``, "linear" method,
    numpy 2.x: index (n - 1) q, the two values around it by one partition, ``_lerp`` from the
    nearer one) without its per-call overhead: it runs for every layout and concurrency."""
    if values.size == 0:
        return {f"p{q}": math.nan for q in PERCENTILES}
    full = np.repeat(values, weights) if weights.size and weights.max() > 1 else values
    n = full.size
    around = {}  # percentile -> (lower index, upper index, fraction)
    for q in PERCENTILES:
        x = (n - 1) * (q / 100)
        lo = math.floor(x)
        around[q] = (n - 1, n - 1, 0.0) if x >= n - 1 else (lo, lo + 1, x - lo)
    at = np.partition(full, sorted({i for lo, hi, _ in around.values() for i in (lo, hi)}
                                   | {n - 1}))  # fmt: skip
    if math.isnan(at[n - 1]):  # (NaN sorts last) numpy gives NaN for every percentile
        return {f"p{q}": math.nan for q in PERCENTILES}
    out = {}
    for q, (lo, hi, t) in around.items():
        a, b = float(at[lo]), float(at[hi])
        d = b - a
        out[f"p{q}"] = b - d * (1 - t) if t >= 0.5 else a + d * t
    return out
