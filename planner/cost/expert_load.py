"""A measured expert-routing distribution and where its load lands on EP ranks.

``ExpertLoad`` holds routed-token counts per layer and logical expert, as SGLang's expert
distribution recorder dumps them (``logical_count``, layers x logical experts; layers with
no routed experts hold zeros). Per layer, a rank's load is the sum of its experts' counts:

- ``contiguous``: rank r holds experts r*E/EP .. (r+1)*E/EP - 1, the engines' default
  placement (vLLM ``--expert-placement-strategy linear``, vllm/config/parallel.py
  ``expert_placement_strategy``; SGLang ``--init-expert-location trivial``,
  python/sglang/srt/eplb/expert_location.py ``init_trivial``);
- ``balanced``: EPLB's packing without redundant experts: the layer's experts, heaviest
  first, each to the least loaded rank that still has room for one (every rank holds E/EP).
  That is ``balanced_packing`` in vLLM's default EPLB policy
  (vllm-project/vllm vllm/distributed/eplb/policy/default.py @ 02c1119c), adapted from
  DeepSeek's EPLB; with one node and no redundant slots it is the whole algorithm. Here it
  is placed from the very counts it is judged on: the best a static rebalance could do;
- a given map (``physical_to_logical_map``, layers x physical slots, the form SGLang's
  ``--init-expert-location`` reads): slot j sits on rank j // (slots / EP) and a logical
  expert's tokens split evenly over its replicas (SGLang's dispatch picks one of them).

Pure: numbers in, numbers out. The collector stores these figures; the cost model prices
the busiest rank from the same placements (planner.cost.routing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np

from planner.errors import PlannerInputError

PLACEMENTS = ("contiguous", "balanced")


@dataclass(frozen=True, eq=False)
class ExpertLoad:
    """Routed-token counts, layers x logical experts, and the placement to price them on."""

    counts: np.ndarray
    source: str = ""  # where the counts came from, for the assumptions line
    run_id: str = ""  # the stored expert-load run, when there is one
    placement: str = "contiguous"
    digest: str = field(init=False, default="")

    def __post_init__(self) -> None:
        c = np.asarray(self.counts, dtype=float)
        if c.ndim != 2 or c.shape[0] < 1 or c.shape[1] < 1:
            raise PlannerInputError(f"expert load {self.source or ''}: counts must be layers x "
                                    f"experts, got shape {c.shape}")  # fmt: skip
        if not np.all(np.isfinite(c)) or (c < 0).any():
            raise PlannerInputError(f"expert load {self.source}: counts must be finite and >= 0")
        if self.placement not in PLACEMENTS:
            raise PlannerInputError(f"expert placement {self.placement!r}: one of "
                                    f"{', '.join(PLACEMENTS)}")  # fmt: skip
        c.setflags(write=False)
        object.__setattr__(self, "counts", c)
        object.__setattr__(self, "digest", hashlib.sha256(c.tobytes()).hexdigest()[:16])

    @property
    def layers(self) -> int:
        return int(self.counts.shape[0])

    @property
    def experts(self) -> int:
        return int(self.counts.shape[1])

    def routed_layers(self) -> np.ndarray:
        """Indices of the layers that routed any token (dense layers hold zeros)."""
        return np.nonzero(self.counts.sum(axis=1) > 0)[0]

    def shares(self) -> np.ndarray:
        """Each routed layer's counts as shares of its total (rows sum to 1)."""
        rows = self.counts[self.routed_layers()]
        return rows / rows.sum(axis=1, keepdims=True)

    def with_placement(self, placement: str) -> ExpertLoad:
        return replace(self, placement=placement)

    def describe(self) -> str:
        return self.source or (f"stored run {self.run_id}" if self.run_id else "measured")

    def check(self, layers: int, experts: int, model: str) -> None:
        """One line when these counts cannot belong to a model of this shape."""
        if (self.layers, self.experts) != (layers, experts):
            raise PlannerInputError(
                f"expert load {self.describe()}: {self.layers} layers x {self.experts} experts, "
                f"but {model} has {layers} layers x {experts} routed experts")  # fmt: skip
        if not len(self.routed_layers()):
            raise PlannerInputError(f"expert load {self.describe()}: no layer routed a token")


def ep_sizes(experts: int) -> list[int]:
    """Every EP size above 1 that divides the expert count."""
    return [n for n in range(2, experts + 1) if experts % n == 0]


def contiguous_ranks(experts: int, ep: int) -> np.ndarray:
    """The rank of each expert under contiguous placement."""
    return np.arange(experts) // (experts // ep)


def balanced_ranks(counts: np.ndarray, ep: int) -> np.ndarray:
    """Per layer, the rank of each expert under greedy balanced packing (module docstring).

    Ties go to the lower rank and, among equal counts, to the lower expert id, so the same
    counts always give the same placement."""
    counts = np.asarray(counts, dtype=float)
    layers, experts = counts.shape
    per_rank = experts // ep
    order = np.argsort(-counts, axis=1, kind="stable")
    rows = np.arange(layers)
    load = np.zeros((layers, ep))
    held = np.zeros((layers, ep), dtype=int)
    ranks = np.empty((layers, experts), dtype=int)
    for i in range(experts):
        e = order[:, i]
        r = np.argmin(np.where(held < per_rank, load, np.inf), axis=1)
        ranks[rows, e] = r
        load[rows, r] += counts[rows, e]
        held[rows, r] += 1
    return ranks


def placement_ranks(counts: np.ndarray, ep: int, placement: str) -> np.ndarray:
    """(layers x experts) rank of every expert of every layer."""
    if placement == "balanced":
        return balanced_ranks(counts, ep)
    return np.broadcast_to(contiguous_ranks(counts.shape[1], ep), counts.shape)


def rank_loads(counts: np.ndarray, ranks: np.ndarray, ep: int) -> np.ndarray:
    """(layers x ep) tokens each rank receives, for experts placed on ``ranks``."""
    layers = counts.shape[0]
    out = np.zeros((layers, ep))
    np.add.at(out, (np.repeat(np.arange(layers), counts.shape[1]), np.ravel(ranks)),
              np.ravel(counts))  # fmt: skip
    return out


def map_loads(counts: np.ndarray, physical_to_logical: np.ndarray, ep: int) -> np.ndarray:
    """(layers x ep) tokens per rank under a given physical-to-logical map (module docstring)."""
    phys = np.asarray(physical_to_logical, dtype=int)
    layers, slots = counts.shape[0], phys.shape[1]
    if phys.shape[0] != layers or slots % ep or phys.min() < 0 or phys.max() >= counts.shape[1]:
        raise PlannerInputError(
            f"placement map of shape {phys.shape} does not fit {layers} layers x "
            f"{counts.shape[1]} experts over {ep} ranks")  # fmt: skip
    rows = np.arange(layers)[:, None]
    replicas = np.zeros_like(counts)
    np.add.at(replicas, (np.broadcast_to(rows, phys.shape), phys), 1.0)
    if (replicas == 0).any():
        raise PlannerInputError("placement map leaves a logical expert on no slot")
    per_slot = counts[rows, phys] / replicas[rows, phys]
    return per_slot.reshape(layers, ep, slots // ep).sum(axis=2)


@dataclass(frozen=True)
class RankFigure:
    """One routed layer's busiest rank under one EP size and placement."""

    ep: int
    placement: str  # contiguous | balanced | recorded (a given map)
    layer: int
    busiest_rank: int
    max_tokens: float
    mean_tokens: float

    @property
    def max_over_mean(self) -> float:
        return self.max_tokens / self.mean_tokens if self.mean_tokens else float("nan")


def rank_figures(load: ExpertLoad, ep: int, placement: str,
                 physical_to_logical: np.ndarray | None = None) -> list[RankFigure]:  # fmt: skip
    """Per routed layer: which rank is busiest and its tokens against the mean rank's."""
    if physical_to_logical is not None:
        loads = map_loads(load.counts, physical_to_logical, ep)
    else:
        loads = rank_loads(load.counts, placement_ranks(load.counts, ep, placement), ep)
    return [RankFigure(ep, placement, int(li), int(np.argmax(loads[li])),
                       float(loads[li].max()), float(loads[li].mean()))
            for li in load.routed_layers()]  # fmt: skip


def layer_max_over_mean(load: ExpertLoad) -> list[float | None]:
    """Per layer: the hottest expert's tokens over the mean expert's (None: no routed token)."""
    totals = load.counts.sum(axis=1)
    return [float(row.max() / row.mean()) if t > 0 else None
            for row, t in zip(load.counts, totals, strict=True)]  # fmt: skip
