"""An expert-load recording as the store's tables (migration 0013) and the ``--json`` summary.

The per-rank figures come from planner.api's placements (contiguous, EPLB-style balanced,
or a recorded map), the same ones the cost model prices the busiest EP rank with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from collectors.expert_load.model import Model
from collectors.expert_load.sglang_files import Recording
from planner.api import expert_load as el

RECORDED = "recorded"


@dataclass
class Figures:
    layers: int
    experts: int
    per_layer: list[float | None]  # hottest expert over the mean expert, per layer
    ranks: list[el.RankFigure]  # every EP size x placement x routed layer
    recorded_ep: int | None

    @property
    def worst_layer(self) -> float:
        return max(x for x in self.per_layer if x is not None)

    def worst(self, ep: int, placement: str) -> el.RankFigure | None:
        rows = [r for r in self.ranks if r.ep == ep and r.placement == placement]
        return max(rows, key=lambda r: r.max_over_mean) if rows else None

    def summary(self) -> dict[str, Any]:
        """The verb's ``--json`` (docs/expert-load.md): each EP entry carries its worst layer."""
        per_rank: dict[str, dict[str, Any]] = {}
        for ep in sorted({r.ep for r in self.ranks}):
            entry: dict[str, Any] = {}
            for placement in (*el.PLACEMENTS, RECORDED):
                w = self.worst(ep, placement)
                if w is not None:
                    entry[f"{placement}_max_over_mean"] = round(w.max_over_mean, 4)
                    entry[f"{placement}_worst_layer"] = w.layer
            per_rank[str(ep)] = entry
        return {"layers": self.layers, "experts": self.experts,
                "per_layer": [{"layer": i, "max_over_mean": None if x is None else round(x, 4)}
                              for i, x in enumerate(self.per_layer)],
                "per_rank": per_rank}  # fmt: skip


def figures(rec: Recording, model: Model,
            placement: tuple[int, np.ndarray] | None) -> Figures:  # fmt: skip
    load = el.ExpertLoad(rec.counts, source=", ".join(rec.files))
    ranks: list[el.RankFigure] = []
    for ep in el.ep_sizes(load.experts):
        for how in el.PLACEMENTS:
            ranks += el.rank_figures(load, ep, how)
    if placement is not None:
        ep, mapping = placement
        ranks += [el.RankFigure(ep, RECORDED, r.layer, r.busiest_rank, r.max_tokens,
                                r.mean_tokens)
                  for r in el.rank_figures(load, ep, "contiguous", mapping)]  # fmt: skip
    return Figures(load.layers, load.experts, el.layer_max_over_mean(load), ranks,
                   placement[0] if placement else None)  # fmt: skip


def tables(rec: Recording, model: Model, figs: Figures,
           extra: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    spec = model.spec
    totals = rec.counts.sum(axis=1)
    routed = totals[totals > 0]
    meta = {
        "model_id": [model.model_id], "model_name": [spec.name], "model_source": [spec.source],
        "config_json": [model.config_json], "engine": ["sglang"],
        "recorder_mode": [extra.get("recorder_mode") or rec.mode],
        "files": [json.dumps(rec.files)], "num_layers": [figs.layers],
        "num_experts": [figs.experts], "top_k": [spec.top_k],
        "dense_layers": [spec.num_dense_layers], "routed_layers": [int(len(routed))],
        "total_count": [float(routed.sum())],
        "layer_total_spread": [float((routed.max() - routed.min()) / routed.max())],
        "forward_passes": [rec.forward_passes], "recorded_ep": [figs.recorded_ep],
        "url": [extra.get("url")], "sglang_version": [extra.get("sglang_version")],
    }  # fmt: skip
    layer, expert = np.nonzero(np.ones_like(rec.counts, dtype=bool))
    counts = {"layer": layer.tolist(), "expert": expert.tolist(),
              "count": rec.counts.ravel().tolist()}  # fmt: skip
    ranks = {
        "ep_size": [r.ep for r in figs.ranks], "placement": [r.placement for r in figs.ranks],
        "layer": [r.layer for r in figs.ranks], "busiest_rank": [r.busiest_rank for r in figs.ranks],
        "max_tokens": [r.max_tokens for r in figs.ranks],
        "mean_tokens": [r.mean_tokens for r in figs.ranks],
        "max_over_mean": [r.max_over_mean for r in figs.ranks],
    }  # fmt: skip
    return {"expert_load_meta": meta, "expert_load_counts": counts, "expert_load_ranks": ranks}
