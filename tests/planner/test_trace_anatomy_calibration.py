"""Calibration from a trace: its step anatomy (which AllReduces are the MoE output) and each
collective's transfer, the shortest duration of a call over the ranks.

The trace is a Kineto-shaped CUDA-graph decode run (tests/trace/synth.py) imported with the
real ``trace`` verb into a real store; its anatomy says which AllReduces are the MoE output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner import measurements
from planner.cost.calibrate import calibrate
from planner.cost.serving import Workload, predict
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


def test_a_collective_s_transfer_is_its_shortest_rank(tmp_path: Path, store_path: Path) -> None:
    """Rank 0 reaches every AllReduce first and waits inside the kernel for rank 1 (10 us a
    call against 4 us): the call's transfer is rank 1's 4 us; the trace run calibrates the
    collectives to it and says how much was waiting."""
    folder = tmp_path / "skewed"
    folder.mkdir()
    for rank, ar_us in ((0, 10.0), (1, 4.0)):
        graph_decode_trace(folder / f"dp0_pp0_tp{rank}_rank{rank}.pt.trace.json", rank,
                           world_size=2, steps=4, layers=LAYERS, allreduce_us=ar_us)  # fmt: skip
    res = run_cli(store_path, "trace", str(folder), "--json")
    assert res.code == 0, res.stderr
    loc = resolve(str(store_path))
    t = qp.trace_allreduce_transfer(loc, res.json["run_id"])
    assert t is not None and (t.ranks, t.steps) == (2, 4)
    assert t.calls_per_step == 2 * LAYERS
    assert t.transfer_us == pytest.approx(4.0) and t.traced_us == pytest.approx(7.0)
    step = measurements.trace_run(loc, res.json["run_id"], 2)
    assert step.layout.tp == 2 and step.transfer_us == pytest.approx(4.0)
    assert "assumed TP=2" in step.source
    m, hw = models.preset("minimax-m2.5"), hardware.preset("h200-sxm-8x")
    cal = calibrate(m, hw, [], [step])
    pr = predict(m, hw, step.layout, Workload(1024, 1024), np.array([step.concurrency]))
    model_us = float(pr.breakdown_ms["allreduce"][0]) / pr.allreduce_calls * 1e3
    assert cal.factors["collectives"] == pytest.approx(4.0 / model_us, rel=1e-3)
    assert any("7 us a call in the profiled step = 4 us transfer (minimum over ranks) + 3 us "
               "waiting" in n for n in cal.notes)  # fmt: skip


def test_ranks_in_step_have_no_wait(graph_run: str, store_path: Path) -> None:
    """Both ranks of the plain run time 4 us a call: the minimum is the mean."""
    t = qp.trace_allreduce_transfer(resolve(str(store_path)), graph_run)
    assert t is not None and t.transfer_us == pytest.approx(t.traced_us)


def test_a_traced_transfer_is_paid_per_call_by_every_layout() -> None:
    """A TP=8 trace whose AllReduce took 80 us a call on the rank that waited least (127
    calls traced, the model's 2L+1): every layout pays 80 us a call, so the TP attention + EP
    MoE estimate keeps only L + L_dense + 1 AllReduces at 80 us each; the traced step's time
    sets no TPOT (no compute factor)."""
    from planner.api import plan
    from planner.cost.calibrate import TraceStep
    from planner.cost.types import ServeLayout

    model, hw = models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x")
    trace = TraceStep(ServeLayout(8, moe_tp=8), 1, 21.7, 127 * 0.088, 127, "trace t1",
                      transfer_us=80.0)  # fmt: skip
    res = plan(model, hw, traces=[trace])
    tp, ep = res.layout("tp"), res.layout("tp_attn_ep_moe")
    i = tp.curve.at(1)
    assert tp.curve.allreduce_calls == 2 * model.num_layers + 1  # attention + MLP, + embedding
    assert tp.calibrated.terms["allreduce"][i] == pytest.approx(tp.curve.allreduce_calls * 0.080,
                                                                rel=1e-3)  # fmt: skip
    assert ep.curve.allreduce_calls == model.num_layers + model.num_dense_layers + 1
    j = ep.curve.at(1)
    assert ep.calibrated.terms["allreduce"][j] == pytest.approx(ep.curve.allreduce_calls * 0.080,
                                                                rel=1e-3)  # fmt: skip
    compute = [t for t in tp.curve.terms if t not in ("allreduce", "all_to_all")]
    assert sum(tp.calibrated.terms[t][i] for t in compute) == pytest.approx(
        sum(tp.curve.terms[t][i] for t in compute))  # fmt: skip
    assert tp.calibrated.tpot_ms[i] < 21.7  # the profiled step is not the service's
    assert res.calibration.sentence().startswith("calibrated on traces only")
