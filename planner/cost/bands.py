"""The measured error band around a prediction: per engine and weight format, per host class.

The residuals are the fit's leave-one-model-out errors (fitting.holdout), recorded once in
planner/cost/fitted.json ``bands`` with the command that produced them. For 80% of the
held-out runs the measured value lay in ``predicted / (1 + q90) .. predicted / (1 + q10)``.
A format an engine has no rows for takes that engine's overall band ("engine/*"); an engine
with none at all takes vLLM's.

Two honesty rules on top:

- a printed prediction lies inside its printed band: where the model is biased for an engine
  and format (every held-out vLLM INT4 run slower than predicted), the band is widened to
  reach the prediction rather than float beside it;
- a host unlike every host of the fit (PCIe-only, GDDR memory, a compute-poor part such as
  H20) gets a wider band (by the spread of whole host-and-model biases on the fixture,
  ``calibration.host_spread``), says why, and names the measurement that would narrow it.

After calibration the band is the user's own held-back error (:func:`from_residuals`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.cost.params import BANDS, CALIBRATION
from planner.cost.step import family
from planner.specs import hardware
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

Z80 = 1.2816  # the 90th percentile of a normal: 80% lie within +-Z80 sd
# The fixture's systems (fitting.fixture.SYSTEMS; a test keeps them equal).
FIT_HOSTS = ("b200-sxm-8x", "b300-sxm-8x", "gb200-nvl72-4x", "gb300-nvl72-4x")
SWEEP = "python -m collectors vllm-bench (a concurrency sweep of the layout you run)"


def _flops_per_byte(hw: HardwareSpec) -> float:
    return hw.bf16_tflops * 1e12 / (hw.mem_bandwidth_gbps * 1e9)


FIT_FLOPS_PER_BYTE = min(_flops_per_byte(hardware.preset(h)) for h in FIT_HOSTS)


@dataclass(frozen=True)
class HostGap:
    """One way a host differs from every host the fit saw."""

    what: str
    why: str
    measure: str  # the measurement that would narrow the band

    def sentence(self) -> str:
        return f"{self.what}: {self.why}; {self.measure} would narrow the band"


def outside_fit(hw: HardwareSpec | None) -> list[HostGap]:
    """How ``hw`` differs from the fit's hosts (Blackwell, NVLink, HBM); empty when alike."""
    if hw is None:
        return []
    out = []
    if hw.interconnect == "pcie":
        out.append(HostGap("PCIe-only", "every fitted run's collectives ran over NVLink",
                           "python -m collectors comm --ops all_reduce (its collectives) and "
                           + SWEEP))  # fmt: skip
    if hardware.memory_kind(hw.gpu_model) == "gddr":
        out.append(HostGap("GDDR memory", "every fitted GPU streams HBM", SWEEP))
    ratio = _flops_per_byte(hw)
    if ratio < FIT_FLOPS_PER_BYTE / 2:
        out.append(HostGap(
            "compute-poor", f"{ratio:.0f} dense BF16 FLOPs per byte of memory bandwidth, under "
            f"half the fitted GPUs' {FIT_FLOPS_PER_BYTE:.0f}: decode can turn compute-bound "
            "where the fit never saw it", SWEEP + " up to your highest concurrency"))  # fmt: skip
    return out


@dataclass(frozen=True)
class Band:
    key: str  # the BANDS entry used, e.g. "vllm/fp8", or the calibration's held-back points
    q10: float
    q90: float
    median_abs: float
    rows: int
    widen: float = 0.0  # extra log half-width: a host outside the fit's data
    gaps: tuple[HostGap, ...] = ()

    def low(self, predicted: np.ndarray) -> np.ndarray:
        # min(..., 1): the prediction itself stays inside its band
        return np.asarray(predicted) * min(1 / (1 + self.q90), 1.0) * math.exp(-self.widen)

    def high(self, predicted: np.ndarray) -> np.ndarray:
        return np.asarray(predicted) * max(1 / (1 + self.q10), 1.0) * math.exp(self.widen)

    def measured(self) -> tuple[float, float]:
        """Where measured runs fell, relative to the prediction (measured / predicted - 1)."""
        return 1 / (1 + self.q90) - 1, 1 / (1 + self.q10) - 1

    def describe(self) -> str:
        lo, hi = self.measured()
        text = (f"{self.key}: measured within {lo:+.0%} .. {hi:+.0%} of the prediction for "
                f"80% of {self.rows} held-out runs (median |error| {self.median_abs:.0%})")  # fmt: skip
        if lo > 0 or hi < 0:
            text += "; drawn to include the prediction (the model is biased here)"
        if self.gaps:
            text += (f"; widened x{math.exp(self.widen):.2f} each way: this host is outside the "
                     "fit's data (" + "; ".join(g.sentence() for g in self.gaps) + ")")  # fmt: skip
        return text


def weight_format(m: ModelSpec) -> str:
    """bf16 | fp8 | int4 | fp4: the format of the weights that dominate decode."""
    comp = "experts" if m.num_experts else "dense_mlp"
    return family(m.bpp(comp), m.native.weights)


def band(engine: str, m: ModelSpec, metric: str = "tpot", hw: HardwareSpec | None = None) -> Band:
    gaps = tuple(outside_fit(hw))
    widen = Z80 * CALIBRATION["host_spread"] if gaps else 0.0
    for key in (f"{engine}/{weight_format(m)}", f"{engine}/*", "vllm/*"):
        entry = BANDS.get(key, {}).get(metric)
        if entry:
            return Band(key, entry["q10"], entry["q90"], entry["median_abs"], entry["rows"],
                        widen, gaps)  # fmt: skip
    raise KeyError(f"no {metric} band for {engine}")  # BANDS always holds vllm/*


def from_residuals(errors: list[float], key: str) -> Band:
    """A band from a calibration's held-back residuals (predicted / measured - 1)."""
    e = np.asarray(errors, dtype=float)
    return Band(key, float(np.quantile(e, 0.1)), float(np.quantile(e, 0.9)),
                float(np.median(np.abs(e))), int(e.size))  # fmt: skip
