"""Expert distribution recordings of DeepSeek-V3, written in SGLang's own formats.

No licensed real recording can be copied into the repository, so these are built here,
from the model's real config (tests/fixtures/serving/configs/deepseek-ai--DeepSeek-V3_config.json:
61 layers, ``first_k_dense_replace`` 3, 256 routed experts, top-8) and SGLang's source
(sgl-project/sglang python/sglang/srt/eplb/expert_distribution.py @ 02295fe5):

- ``stat`` / ``stat_approx``: ``_StatAccumulator.dump`` -> ``torch.save({"rank": 0,
  "logical_count": int32 [buffered passes, layers, logical experts],
  "average_utilization_rate_over_window": None})`` (None unless the metrics are on);
- ``per_pass``: ``_DetailAccumulator.dump`` -> per rank ``{"records": [{"forward_pass_id",
  "rank", "gatherer_key": "primary", "global_physical_count": [layers, physical]}],
  "last_physical_to_logical_map": [layers, physical]}``;
- ``per_token``: the same records plus ``_DetailSinglePassGatherer.collect``'s
  ``input_ids``, ``positions``, ``extend_seq_lens``, ``forward_mode``,
  ``topk_ids_of_layer`` [layers, tokens, 8], ``misc_objects``; its
  ``global_physical_count`` is the scatter-add of the top-k ids
  (``_convert_per_token_to_global_physical_count``);
- the JSON SGLang's ``--init-expert-location`` reads: ``{"logical_count": [[...]]}``
  (expert_location.py @ 01fec5c2 ``compute_initial_expert_location_metadata``).

The routing is skewed like the SGLang team's published DeepSeek-V3 recordings: each MoE
layer's expert weights are lognormal, so the hottest expert lands at several times the mean.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.helpers import FIXTURES

CONFIG = FIXTURES / "serving" / "configs" / "deepseek-ai--DeepSeek-V3_config.json"


@dataclass(frozen=True)
class Shape:
    layers: int
    dense: int
    experts: int
    top_k: int


def deepseek_v3() -> Shape:
    cfg = json.loads(CONFIG.read_text())
    return Shape(cfg["num_hidden_layers"], cfg["first_k_dense_replace"], cfg["n_routed_experts"],
                 cfg["num_experts_per_tok"])  # fmt: skip


def skewed_counts(shape: Shape, tokens: int = 40_000, sigma: float = 0.8,
                  seed: int = 7) -> np.ndarray:  # fmt: skip
    """int64 [layers, experts]: every MoE layer routes ``tokens`` x top-k assignments."""
    rng = np.random.default_rng(seed)
    out = np.zeros((shape.layers, shape.experts), dtype=np.int64)
    for layer in range(shape.dense, shape.layers):
        w = rng.lognormal(0.0, sigma, shape.experts)
        out[layer] = rng.multinomial(tokens * shape.top_k, w / w.sum())
    return out


def write_json(path: Path, counts: np.ndarray) -> Path:
    path.write_text(json.dumps({"logical_count": counts.tolist()}))
    return path


def write_stat(path: Path, counts: np.ndarray, passes: int = 4) -> Path:
    """The stat dump: the counts spread over ``passes`` rows of the circular buffer."""
    import torch

    rng = np.random.default_rng(1)
    parts = np.zeros((passes, *counts.shape), dtype=np.int64)
    for layer, row in enumerate(counts):
        for expert, n in enumerate(row):
            parts[:, layer, expert] = rng.multinomial(int(n), [1 / passes] * passes)
    torch.save({"rank": 0, "logical_count": torch.tensor(parts, dtype=torch.int32),
                "average_utilization_rate_over_window": None}, path)  # fmt: skip
    return path


def physical_map(shape: Shape, redundant: int) -> np.ndarray:
    """[layers, E + redundant]: logical i on slot i, then replicas of experts 0, 1, ..."""
    row = list(range(shape.experts)) + [i % shape.experts for i in range(redundant)]
    return np.tile(np.asarray(row, dtype=np.int64), (shape.layers, 1))


def write_per_pass(folder: Path, counts: np.ndarray, shape: Shape, ranks: int = 2,
                   passes: int = 3, redundant: int = 32) -> list[Path]:  # fmt: skip
    """One file per rank; each logical expert's tokens split over its replicas, ranks and
    passes, so that summing every record and mapping slots back gives ``counts``."""
    import torch

    mapping = physical_map(shape, redundant)
    rng = np.random.default_rng(2)
    slots = np.zeros((ranks, passes, *mapping.shape), dtype=np.int64)
    for layer in range(shape.layers):
        for expert in range(shape.experts):
            where = np.nonzero(mapping[layer] == expert)[0]
            cells = rng.multinomial(int(counts[layer, expert]),
                                    [1 / (len(where) * ranks * passes)] * (len(where) * ranks * passes))  # fmt: skip
            slots[:, :, layer, where] = cells.reshape(len(where), ranks, passes).transpose(1, 2, 0)
    paths = []
    for rank in range(ranks):
        records = [{"forward_pass_id": p, "rank": rank, "gatherer_key": "primary",
                    "global_physical_count": torch.tensor(slots[rank, p], dtype=torch.int32)}
                   for p in range(passes)]  # fmt: skip
        path = folder / f"expert_distribution_recorder_1764900000.5_{rank}.pt"
        torch.save({"records": records,
                    "last_physical_to_logical_map": torch.tensor(mapping)}, path)  # fmt: skip
        paths.append(path)
    return paths


def write_per_token(path: Path, shape: Shape, tokens: int = 96, seed: int = 3) -> np.ndarray:
    """One rank's per_token dump of two forward passes; returns the logical counts its top-k
    ids make (no redundant experts: physical = logical)."""
    import torch

    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 0.8, (shape.layers, shape.experts))
    counts = np.zeros((shape.layers, shape.experts), dtype=np.int64)
    records = []
    for fwd in range(2):
        topk = np.full((shape.layers, tokens, shape.top_k), -1, dtype=np.int32)
        for layer in range(shape.dense, shape.layers):  # dense layers never select experts
            p = weights[layer] / weights[layer].sum()
            for t in range(tokens):
                topk[layer, t] = rng.choice(shape.experts, shape.top_k, replace=False, p=p)
        gpc = np.zeros((shape.layers, shape.experts), dtype=np.int64)
        for layer in range(shape.layers):
            ids = topk[layer].ravel()
            gpc[layer] = np.bincount(ids[ids >= 0], minlength=shape.experts)
        counts += gpc
        records.append({
            "forward_pass_id": fwd, "rank": 0, "gatherer_key": "primary",
            "input_ids": rng.integers(0, 129280, tokens).tolist(),
            "positions": list(range(tokens)), "extend_seq_lens": [tokens], "forward_mode": 1,
            "topk_ids_of_layer": torch.tensor(topk), "misc_objects": [],
            "global_physical_count": torch.tensor(gpc, dtype=torch.int32),
        })  # fmt: skip
    torch.save({"records": records,
                "last_physical_to_logical_map": torch.tensor(physical_map(shape, 0))}, path)  # fmt: skip
    return counts
