"""The measured error band around a prediction: per engine and weight format.

The residuals are the fit's leave-one-model-out errors (fitting.holdout), recorded once in
planner/cost/params.py ``BANDS`` with the command that produced them. For 80% of the
held-out runs the measured value lay in ``predicted / (1 + q90) .. predicted / (1 + q10)``.
A format an engine has no rows for takes that engine's overall band ("engine/*"); an engine
with none at all takes vLLM's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.params import BANDS
from planner.cost.step import family
from planner.specs.models import ModelSpec


@dataclass(frozen=True)
class Band:
    key: str  # the BANDS entry used, e.g. "vllm/fp8"
    q10: float
    q90: float
    median_abs: float
    rows: int

    def low(self, predicted: np.ndarray) -> np.ndarray:
        return np.asarray(predicted) / (1 + self.q90)

    def high(self, predicted: np.ndarray) -> np.ndarray:
        return np.asarray(predicted) / (1 + self.q10)

    def describe(self) -> str:
        lo, hi = 1 / (1 + self.q90) - 1, 1 / (1 + self.q10) - 1
        return (f"{self.key}: measured within {lo:+.0%} .. {hi:+.0%} of the prediction for "
                f"80% of {self.rows} held-out runs (median |error| {self.median_abs:.0%})")  # fmt: skip


def weight_format(m: ModelSpec) -> str:
    """bf16 | fp8 | int4 | fp4: the format of the weights that dominate decode."""
    comp = "experts" if m.num_experts else "dense_mlp"
    return family(m.bpp(comp), m.native.weights)


def band(engine: str, m: ModelSpec, metric: str = "tpot") -> Band:
    for key in (f"{engine}/{weight_format(m)}", f"{engine}/*", "vllm/*"):
        entry = BANDS.get(key, {}).get(metric)
        if entry:
            return Band(key, entry["q10"], entry["q90"], entry["median_abs"], entry["rows"])
    raise KeyError(f"no {metric} band for {engine}")  # BANDS always holds vllm/*
