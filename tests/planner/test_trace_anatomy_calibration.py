"""Calibration from a trace uses its step anatomy: AllReduce scaled per measured call.

The trace is a Kineto-shaped CUDA-graph decode run (tests/trace/synth.py) imported with the
real ``trace`` verb into a real store; its anatomy says which AllReduces are the MoE output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.api import plan
from planner.cost.calibrate import Calibration
from planner.specs import hardware, models
from store.location import resolve
from store.queries import planner as qp
from tests.helpers import run_cli
from tests.trace.synth import graph_decode_trace

LAYERS = 3


@pytest.fixture
def graph_run(tmp_path: Path, store_path: Path) -> str:
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in range(2):
        graph_decode_trace(folder / f"dp0_pp0_tp{rank}_rank{rank}.pt.trace.json", rank,
                           world_size=2, steps=4, layers=LAYERS)  # fmt: skip
    res = run_cli(store_path, "trace", str(folder), "--json")
    assert res.code == 0, res.stderr
    return res.json["run_id"]


def test_anatomy_of_a_stored_graph_run(graph_run: str, store_path: Path) -> None:
    a = qp.trace_allreduce_anatomy(resolve(str(store_path)), graph_run)
    assert a is not None
    # one attention and one MoE AllReduce per layer, every step
    assert a.calls_per_step == 2 * LAYERS and a.moe_calls_per_step == LAYERS
    assert a.moe_ms_per_step == pytest.approx(4.0 * LAYERS / 1e3)
    assert 0 < a.moe_pct_of_step < 100


def test_no_anatomy_for_a_run_that_is_not_there(store_path: Path, graph_run: str) -> None:
    assert qp.trace_allreduce_anatomy(resolve(str(store_path)), "trace-nope") is None


def test_allreduce_is_scaled_per_measured_call() -> None:
    """127 measured calls of 80 us against the model's 2L+1: every layout pays 80 us a call,
    and the extra calls' time stays in the compute share (the TP step is still reproduced)."""
    model, hw = models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x")
    measured = dict(layout_kind="tp", tp=8, dp=1, concurrency=1, step_ms=21.7,
                    comm_ms=(("allreduce", 127 * 0.080),), source="trace t1")  # fmt: skip
    per_call = plan(model, hw, calibration=Calibration(**measured, allreduce_calls=127))
    total = plan(model, hw, calibration=Calibration(**measured))
    tp = per_call.layout("tp")
    i = tp.curve.at(1)
    calls = tp.curve.allreduce_calls
    assert calls == 2 * model.num_layers + 1  # attention + MLP per layer, + embedding
    assert tp.calibrated.terms["allreduce"][i] == pytest.approx(calls * 0.080)
    assert tp.calibrated.tpot_ms[i] == pytest.approx(21.7)
    # Without the call count the whole measured AllReduce lands on the model's calls.
    assert total.layout("tp").calibrated.terms["allreduce"][i] == pytest.approx(127 * 0.080)
    assert total.layout("tp").calibrated.tpot_ms[i] == pytest.approx(21.7)
    # The TP-attention + EP-MoE estimate keeps only L + L_dense + 1 AllReduces, at 80 us each.
    ep = per_call.layout("tp_attn_ep_moe")
    j = ep.curve.at(1)
    assert ep.curve.allreduce_calls == model.num_layers + model.num_dense_layers + 1
    assert ep.calibrated.terms["allreduce"][j] == pytest.approx(ep.curve.allreduce_calls * 0.080)
    # The compute factor is the one the TP step implied, applied to every layout.
    f = per_call.calibration_factors["compute"]
    compute = [t for t in ep.curve.terms if t not in ("allreduce", "all_to_all")]
    assert sum(ep.calibrated.terms[t][j] for t in compute) == pytest.approx(
        f * sum(ep.curve.terms[t][j] for t in compute), rel=1e-3)  # fmt: skip
