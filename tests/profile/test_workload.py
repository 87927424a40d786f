"""The decode step itself, in-process at TP=1 (no process group): shapes and annotations."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from collectors.profile import workload
from collectors.profile.model_presets import PRESETS, scaled


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_scaled_shapes_split_exactly_over_tp(preset: str, tp: int) -> None:
    shape = scaled(PRESETS[preset], 1 / 16, tp, 3)
    assert shape.layers == 3 and shape.top_k == PRESETS[preset].top_k
    assert shape.q_heads % tp == 0 and shape.expert_inter % tp == 0 and shape.vocab % tp == 0
    assert shape.experts >= 2 * shape.top_k
    if shape.attention == "gqa":
        assert shape.kv_heads % tp == 0 and shape.q_heads % shape.kv_heads == 0
    assert scaled(PRESETS[preset], 1.0, 1, 61).hidden == PRESETS[preset].hidden


@pytest.mark.parametrize("preset", ["kimi-k2.5", "minimax-m2.5"])  # MLA and GQA
def test_decode_step_runs_and_annotates_each_part(preset: str) -> None:
    shape = scaled(PRESETS[preset], 1 / 32, 1, 1)
    model = workload.build(shape, 0, 1, 3, 16, torch.device("cpu"), torch.float32)
    x = torch.randn(3, shape.hidden)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tokens = workload.decode_step(model, x, pos=15)
    assert tokens.shape == (3,) and int(tokens.max()) < shape.vocab
    regions = {e.name for e in prof.events() if e.name.startswith(workload.REGION)}
    parts = {"attention", "moe", "gemm", "norm", "memory", "sampling", "elementwise"}
    assert {workload.REGION + p for p in parts} <= regions
    # TP=1 has no collectives to annotate.
    assert not {workload.REGION + c for c in ("allreduce", "allgather")} & regions
