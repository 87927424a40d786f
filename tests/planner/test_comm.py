"""Communication curves: log-log interpolation, floor, bandwidth tail, derived and spec sheet."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.cost.comm import CommCurve, CommSet, bus_factor, curves_from_rows, wire_factor
from planner.specs import hardware


def _curve(**kw) -> CommCurve:
    base = dict(op="all_to_all", world_size=8, bytes=(1000.0, 100_000.0), us=(10.0, 1000.0),
                kind="measured", source="measured comm run r1", tail_busbw_gbps=10.0,
                gpu_model="NVIDIA RTX PRO 6000 Blackwell Server Edition")  # fmt: skip
    base.update(kw)
    return CommCurve(**base)


def test_log_log_interpolation_floor_and_tail() -> None:
    c = _curve()
    # Between points: a straight line in log-log, so the geometric midpoint maps to 100 us.
    assert float(c.latency_us(10_000.0)) == pytest.approx(100.0)
    # below: the smallest size's time less its bytes at the curve's bandwidth (its latency),
    # plus the fewer bytes: 10 - 1000 x 7 / 10 GB/s + 1 x 7 / 10 GB/s
    assert float(c.latency_us(1.0)) == pytest.approx(10.0 - 0.7 + 0.0007)
    extra = 1e6 - 1e5  # beyond: last point + extra bytes over the bus bandwidth
    tail = 1000.0 + extra * wire_factor("all_to_all", 8) / 10e9 * 1e6  # 7 destinations
    assert float(c.latency_us(1e6)) == pytest.approx(tail)
    ys = c.latency_us(np.geomspace(1, 1e7, 50))
    assert np.all(np.diff(ys) >= 0)  # monotone in bytes


def test_single_point_curve_and_bus_factors() -> None:
    c = _curve(op="all_reduce", bytes=(14336.0,), us=(78.0,), tail_busbw_gbps=30.0)
    assert float(c.latency_us(14336.0)) == 78.0
    assert float(c.latency_us(2 * 14336.0)) == pytest.approx(78 + 14336 * 1.75 / 30e9 * 1e6)
    assert bus_factor("all_reduce", 8) == 1.75 and bus_factor("all_gather", 8) == 0.875
    assert wire_factor("all_to_all", 8) == 7 and wire_factor("all_reduce", 8) == 1.75


def test_commset_kinds_are_labelled() -> None:
    pcie, nvl = hardware.preset("rtx-pro-6000-pcie-8x"), hardware.preset("h200-sxm-8x")
    s = CommSet([_curve(op="all_reduce", world_size=4)], pcie)
    ar = s.get("all_reduce", 8)  # the 4-GPU curve does not stand in for 8 GPUs
    assert ar.kind == "spec" and "spec sheet of rtx-pro-6000-pcie-8x" in ar.source
    # alpha + bytes on the wire over 70% of the spec link bandwidth
    assert float(ar.latency_us(1e6)) == pytest.approx(27 + 1e6 * 1.75 / (55e9 * 0.7) * 1e6,
                                                      rel=1e-4)  # fmt: skip
    assert s.get("all_reduce", 4).kind == "measured"
    ag = s.get("all_gather", 4)
    assert ag.kind == "derived" and "half the AllReduce" in ag.source
    assert float(ag.latency_us(4096.0)) == pytest.approx(
        float(s.get("all_reduce", 4).latency_us(4096.0)) / 2)  # fmt: skip
    assert s.get("all_gather", 8).kind == "spec"  # nothing measured at 8 GPUs to derive from
    fast = s.get("all_reduce_fast", 8)
    assert fast.kind == "derived" and float(fast.latency_us(4096.0)) < float(ar.latency_us(4096.0))
    assert {(c.op, c.world_size) for c in s.used()} == {
        ("all_reduce", 8), ("all_reduce", 4), ("all_gather", 4), ("all_gather", 8),
        ("all_reduce_fast", 8)}  # fmt: skip
    assert CommSet([], nvl).latency_us("all_to_all", 8, 1e6) < CommSet([], pcie).latency_us(
        "all_to_all", 8, 1e6)  # fmt: skip


def test_measured_curves_win_over_published_ones() -> None:
    hw = hardware.preset("rtx-pro-6000-pcie-8x")
    pub = _curve(op="all_reduce", kind="published", source="published x", us=(30.0, 300.0))
    meas = _curve(op="all_reduce", source="measured comm run r9", us=(20.0, 200.0))
    assert CommSet([pub, meas], hw).get("all_reduce", 8).source == "measured comm run r9"


def test_curves_from_store_rows() -> None:
    rows = [
        # nccl-tests' size convention: all-to-all bytes count every destination.
        {"run_id": "c1", "op": "all_to_all", "dtype": "bf16", "bytes": 8 * 14336,
         "p50_us": 20.0, "world_size": 8, "device": "cuda", "backend": "nccl"},
        {"run_id": "c1", "op": "all_to_all", "dtype": "bf16", "bytes": 8 * 16 * 14336,
         "p50_us": 1000.0, "world_size": 8, "device": "cuda", "backend": "nccl"},
        {"run_id": "c1", "op": "all_reduce", "dtype": "bf16", "tokens_per_rank": 1,
         "hidden": 7168, "p50_us": 70.0, "world_size": 8, "device": "cuda"},
        {"run_id": "c1", "op": "all_reduce", "dtype": "fp8", "bytes": 7168, "p50_us": 1.0,
         "world_size": 8, "device": "cuda"},  # an FP8 collective is never a baseline
        {"run_id": "c2", "op": "all_reduce", "dtype": "bf16", "bytes": 14336, "p50_us": 9e3,
         "world_size": 8, "device": "cpu", "backend": "gloo"},
        {"run_id": "c3", "op": "allreduce", "dtype": "bfloat16", "bytes": 14336, "p50_us": 20.0,
         "world_size": 8, "device": "cuda", "backend": "flashinfer_pcie_ipc"},
    ]  # fmt: skip
    curves = {(c.op, c.source.split()[3]): c for c in curves_from_rows(rows)}
    a2a = curves[("all_to_all", "c1")]
    assert a2a.bytes == (14336.0, 16 * 14336.0) and a2a.kind == "measured"
    assert curves[("all_reduce", "c1")].us == (70.0,)
    assert ("all_reduce", "c2") not in curves  # CPU runs only when asked for by run id
    assert ("all_reduce_fast", "c3") in curves
    with_cpu = curves_from_rows(rows, devices=())
    assert any("c2" in c.source and "gloo, cpu" in c.source for c in with_cpu)
    assert all(math.isfinite(u) for c in with_cpu for u in c.us)
