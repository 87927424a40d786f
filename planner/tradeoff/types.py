"""What a plan holds: per layout its serving-model curve with the measured error band, and
whether it rests on a collective nobody measured here (a hypothesis, never the headline).

planner.api builds these; planner.tradeoff.findings, planner.tradeoff.reference and the pages read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.cost.calibrate import HostCalibration
from planner.cost.expert_load import ExpertLoad
from planner.policy.check import Policy, Violation
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec
from planner.tradeoff.layouts import Layout

REPORT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TERMS = ("attention", "kv_cache", "mlp", "experts", "expert_imbalance", "lm_head", "prefill",
         "allreduce", "all_to_all")  # fmt: skip


@dataclass(frozen=True)
class Assumption:
    what: str
    value: str
    source: str


@dataclass(frozen=True)
class Collective:
    """One collective a layout uses, and the curve it was costed on."""

    op: str
    world_size: int
    kind: str  # measured | published | derived | spec
    source: str


@dataclass
class LayoutCurve:
    """The serving model's answer for one layout over the concurrency grid."""

    layout: Layout
    concurrency: np.ndarray
    tpot_ms: np.ndarray
    ttft_ms: np.ndarray
    tokens_per_s: np.ndarray  # output tokens/s of all replicas
    terms: dict[str, np.ndarray]
    fits: np.ndarray  # weights fit and every request is admitted (no wait for KV room)
    low_ms: np.ndarray  # TPOT band: measured expected within low..high for 80% of runs
    high_ms: np.ndarray
    ttft_low_ms: np.ndarray
    ttft_high_ms: np.ndarray
    weights_per_gpu_bytes: float = float("nan")
    kv_capacity_seqs: float = 0.0
    dummy_ranks: np.ndarray = field(default_factory=lambda: np.zeros(0))
    allreduce_calls: int = 0
    engine: str = "vllm"
    predict_args: list[str] = field(default_factory=list)
    why_not: str = ""  # set when the model cannot answer (does not fit): arrays are NaN
    calibrated: bool = False
    # Per-request percentiles where the serving model gives them, over the grid:
    # {"tpot_ms": {"p50": ..., "p90": ..., "p99": ...}, "ttft_ms": {...}}; empty: means only.
    percentiles: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    running_mean: np.ndarray = field(default_factory=lambda: np.zeros(0))  # busiest rank
    queued_mean: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per rank

    def at(self, c: int) -> int:
        return int(np.searchsorted(self.concurrency, c))


@dataclass
class LayoutResult:
    layout: Layout
    compliant: bool
    violations: list[Violation]
    curve: LayoutCurve
    calibrated: LayoutCurve | None = None
    collectives: list[Collective] = field(default_factory=list)
    unmeasured: list[Collective] = field(default_factory=list)  # what makes it a hypothesis
    measure: list[str] = field(default_factory=list)  # commands that would measure those

    @property
    def hypothesis(self) -> bool:
        return bool(self.unmeasured)

    @property
    def recommendable(self) -> bool:
        return self.compliant and not self.unmeasured

    def view(self, calibrated: bool = False) -> LayoutCurve:
        return self.calibrated if calibrated and self.calibrated is not None else self.curve


@dataclass(frozen=True)
class Range:
    start: int
    end: int
    layout: str
    tpot_ms_start: float
    tpot_ms_end: float


@dataclass(frozen=True)
class Crossover:
    concurrency: int  # first concurrency where `faster` beats `slower`
    faster: str
    slower: str

    def sentence(self) -> str:
        return f"from concurrency {self.concurrency}, {self.faster} beats {self.slower}"


@dataclass(frozen=True)
class PolicyCost:
    concurrency: int
    blocked_layout: str
    best_compliant: str
    cost_ms: float  # TPOT the policy costs (blocked TPOT lower by this much)

    def sentence(self) -> str:
        return (f"the policy costs {self.cost_ms:.2f} ms TPOT at concurrency {self.concurrency} "
                f"({self.blocked_layout} vs {self.best_compliant})")  # fmt: skip


@dataclass(frozen=True)
class Call:
    """The recommendation at one concurrency, with the layouts too close to call."""

    concurrency: int
    layout: str | None
    tpot_ms: float
    tpot_ms_low: float
    tpot_ms_high: float
    too_close: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlacementEffect:
    """One EP layout at one concurrency: TPOT under each routing assumption."""

    layout: str
    concurrency: int
    uniform_ms: float
    contiguous_ms: float
    balanced_ms: float

    @property
    def balanced_win_ms(self) -> float:
        return self.contiguous_ms - self.balanced_ms

    def sentence(self) -> str:
        pct = 100 * self.balanced_win_ms / self.contiguous_ms if self.contiguous_ms else 0.0
        return (f"{self.layout} at concurrency {self.concurrency}: TPOT {self.uniform_ms:.2f} ms "
                f"under uniform routing, {self.contiguous_ms:.2f} ms as measured with experts "
                f"placed contiguously; a balanced placement would win "
                f"{self.balanced_win_ms:.2f} ms ({pct:.0f}%), {self.balanced_ms:.2f} ms")  # fmt: skip


@dataclass
class PlanResult:
    model: ModelSpec
    hardware: HardwareSpec
    policy: Policy
    concurrency: np.ndarray
    layouts: list[LayoutResult]
    recommended: list[Range]
    crossovers: list[Crossover]
    policy_costs: list[PolicyCost]
    assumptions: list[Assumption]
    isl: int = 1024
    osl: int = 1024
    engine: str = "vllm"
    num_prompts: int = 0  # the benchmark's --num-prompts; 0 = its default (planner.sched.bench)
    token_budget: int = 0  # the server's launched token budget (--token-budget); 0 = default
    bench: str = "inferencex"  # the benchmark client (planner.sched.bench)
    range_ratio: float = -1.0  # its --random-range-ratio; -1 = its default
    max_running: int = 0  # the server's --max-num-seqs / --max-running-requests; 0 = default
    findings: list[str] = field(default_factory=list)
    calibration: HostCalibration | None = None
    calibration_factors: dict[str, float] = field(default_factory=dict)
    recommended_calibrated: list[Range] = field(default_factory=list)
    comm_sources: list[str] = field(default_factory=list)
    expert_load: ExpertLoad | None = None  # the measured routing the plan is priced on
    placement_effects: list[PlacementEffect] = field(default_factory=list)

    def layout(self, name_or_kind: str) -> LayoutResult:
        for r in self.layouts:
            if name_or_kind in (r.layout.name, r.layout.kind):
                return r
        raise KeyError(name_or_kind)

    @property
    def headline(self) -> Range | None:
        """The first recommended range: what the page and CLI lead with."""
        return self.recommended[0] if self.recommended else None

    def report_concurrencies(self) -> list[int]:
        grid = set(int(x) for x in self.concurrency)
        picks = [c for c in REPORT_CONCURRENCIES if c in grid]
        return picks or [int(self.concurrency[0]), int(self.concurrency[-1])]
