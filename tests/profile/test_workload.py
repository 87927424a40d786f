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
def test_decode_step_runs_its_parts_as_named_ops(preset: str) -> None:
    shape = scaled(PRESETS[preset], 1 / 32, 1, 1)
    model = workload.build(shape, 0, 1, 3, 16, torch.device("cpu"), torch.float32)
    x = torch.randn(3, shape.hidden)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tokens = workload.decode_step(model, x, pos=15)
    assert tokens.shape == (3,) and int(tokens.max()) < shape.vocab
    top = {e.name for e in prof.events() if e.cpu_parent is None}
    attention = "stepscope::mla_attention" if preset == "kimi-k2.5" else "stepscope::gqa_attention"
    assert {attention, "stepscope::moe", "stepscope::sample_greedy", "aten::rms_norm"} <= top
    # TP=1 has no collectives.
    assert not {"stepscope::all_reduce", "stepscope::all_gather"} & top


def test_custom_ops_land_in_their_categories() -> None:
    """The trace collector's CPU-op taxonomy puts each part of the step where it belongs."""
    from collectors.trace.taxonomy import cpu_op_category

    for op, category in workload.OP_CATEGORIES.items():
        assert cpu_op_category(op) == category, op
    for op, category in (("aten::matmul", "gemm"), ("aten::rms_norm", "norm"),
                         ("aten::copy_", "memory"), ("aten::add", "elementwise")):  # fmt: skip
        assert cpu_op_category(op) == category, op


def test_weights_are_drawn_on_the_device_and_replicated_parts_agree() -> None:
    """build() draws with a generator of the target device (no CPU randn + copy); the
    replicated router matches across ranks, sharded experts differ."""
    shape = scaled(PRESETS["kimi-k2.5"], 1 / 64, 2, 1)
    cpu = torch.device("cpu")
    r0 = workload.build(shape, 0, 2, 2, 8, cpu, torch.float32)
    r1 = workload.build(shape, 1, 2, 2, 8, cpu, torch.float32)
    assert r0.layers[0].router.device == cpu
    assert torch.equal(r0.layers[0].router, r1.layers[0].router)
    assert not torch.equal(r0.layers[0].w_gate_up, r1.layers[0].w_gate_up)
    std = r0.layers[0].w_gate_up.std().item() * (shape.hidden ** 0.5)
    assert 0.8 < std < 1.2  # scaled by 1/sqrt(fan_in)
