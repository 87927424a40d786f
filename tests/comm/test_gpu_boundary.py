"""comm's CUDA paths at the hardware boundary: the same timer, graph holder, device binding
and aggregation code the GPU run uses, driven by a simulated CUDA stream (tests/fakes/
fake_cuda.py) or real gloo.

Upstream: NVIDIA/nccl-tests src/common.cu ``BenchTime`` (time ``iters`` launches, divide,
``Allreduce(args, &deltaSec, average)`` over ranks); pytorch/pytorch#115388 (destroy with a
live NCCL graph hangs); torch 2.13 torch/distributed/distributed_c10d.py
``init_process_group(device_id=...)``; torch/cuda/graphs.py ``CUDAGraph.reset``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from collectors.comm import metrics, timing, worker
from collectors.comm.command import graph_capture_works
from collectors.comm.sizes import Point
from tests.fakes.fake_cuda import Stream, fake_torch
from tests.helpers import query, run_cli

ITERS = 50
GPU_US, DISPATCH_US = 8.0, 20.0  # a decode-size all_reduce vs the host's launch cost


def _cfg(**kw) -> worker.Config:
    base = dict(points=[Point("all_reduce", 1, 14336, 7168)], dtype="bf16", backend="nccl",
                device="cuda", iters=ITERS, warmup=2, graph=False, timeout_s=60,
                status_dir="/nonexistent")  # fmt: skip
    return worker.Config(**{**base, **kw})


def test_back_to_back_events_on_an_idle_gpu_measure_the_host() -> None:
    """The fake reproduces item 2's problem: without a pre-roll, event pairs time dispatch."""
    s = Stream(dispatch_us=DISPATCH_US)
    t = fake_torch(s)
    call = t.cuda.collective(GPU_US)
    pairs = []
    for _ in range(ITERS):
        a, b = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        a.record()
        call()
        b.record()
        pairs.append((a, b))
    t.cuda.synchronize()
    naive = sorted(a.elapsed_time(b) * 1e3 for a, b in pairs)
    assert naive[ITERS // 2] >= DISPATCH_US  # the host's cost, not the collective's 8 us


def test_pre_roll_makes_per_call_times_gpu_time() -> None:
    s = Stream(dispatch_us=DISPATCH_US)
    t = fake_torch(s)
    timer = timing.CudaTimer(t)
    assert timer.cycles_per_us == pytest.approx(s.cycles_per_us, rel=0.01)
    burst = timer.burst(t.cuda.collective(GPU_US), ITERS)
    assert len(burst.per_call_us) == ITERS
    assert all(v == pytest.approx(GPU_US) for v in burst.per_call_us)
    assert burst.burst_us == pytest.approx(GPU_US)  # one event pair over the burst / iters
    assert timer.short_prerolls == 0
    assert s.log.count("sleep") == 3  # calibration + one pre-roll per pass


def test_a_pre_roll_that_runs_out_is_doubled_and_repeated(monkeypatch) -> None:
    monkeypatch.setattr(timing, "PREROLL_MIN_US", 100.0)
    monkeypatch.setattr(timing, "PREROLL_PER_CALL_US", 0.0)
    s = Stream(dispatch_us=DISPATCH_US)
    t = fake_torch(s)
    timer = timing.CudaTimer(t)
    burst = timer.burst(t.cuda.collective(GPU_US), ITERS)
    assert timer.short_prerolls >= 1 and timer.preroll_extra == 2 ** timer.short_prerolls
    assert all(v == pytest.approx(GPU_US) for v in burst.per_call_us)


def test_cpu_timer_shares_the_burst_shape() -> None:
    now = [0]

    def call() -> None:  # a gloo call that takes 3 us
        now[0] += 3000

    burst = timing.CpuTimer(clock=lambda: now[0]).burst(call, 4)
    assert burst.per_call_us == [3.0] * 4 and burst.burst_us == pytest.approx(3.0)


def _recording_dist(log: list[str]) -> SimpleNamespace:
    return SimpleNamespace(barrier=lambda: log.append("barrier"),
                           destroy_process_group=lambda: log.append("destroy"))  # fmt: skip


def test_graph_is_released_before_the_process_group_is_destroyed() -> None:
    s = Stream()
    t = fake_torch(s)
    graphs = timing.Graphs(t)
    op = SimpleNamespace(call=t.cuda.collective(GPU_US))
    dist = _recording_dist(s.log)
    burst = worker.measure_point(t, dist, op, _cfg(graph=True, iters=3), timing.CpuTimer(),
                                 graphs)  # fmt: skip
    assert len(burst.per_call_us) == 3 and graphs.live == []
    log = s.log
    # warm-up call outside capture, capture, replays (warm-up, timed), then reset + sync
    assert log.index("capture:begin") < log.index("graph:replay") < log.index("graph:reset")
    assert log[log.index("graph:reset") + 1] == "synchronize"
    assert log.count("graph:replay") == 2 + 2 * 3  # warm-up + per-call pass + burst pass
    # A graph still held when the rank ends (a failure mid-point) goes before destroy.
    graphs.capture(op.call)
    timing.teardown(graphs, dist)
    tail = log[log.index("capture:end", log.index("graph:reset") + 1):]
    assert tail == ["capture:end", "synchronize", "graph:reset", "synchronize", "destroy"]


def test_graph_is_released_even_when_timing_fails() -> None:
    s = Stream()
    t = fake_torch(s)
    graphs = timing.Graphs(t)

    class Broken:
        def burst(self, call, iters):
            raise RuntimeError("NCCL watchdog timeout")

    op = SimpleNamespace(call=t.cuda.collective(GPU_US))
    with pytest.raises(RuntimeError):
        worker.measure_point(t, _recording_dist(s.log), op, _cfg(graph=True), Broken(), graphs)
    assert graphs.live == [] and "graph:reset" in s.log


def test_spawned_ranks_ignore_a_local_rank_left_in_the_shell(monkeypatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "0")
    bound: list[int] = []
    t = SimpleNamespace(cuda=SimpleNamespace(set_device=bound.append), device=torch.device)
    cfg = _cfg()
    assert worker._bind_device(t, cfg, 1) == "cuda:1" and bound == [1]
    kwargs = worker.init_kwargs(t, cfg, "cuda:1")
    assert kwargs["device_id"] == torch.device("cuda", 1)
    assert "device_id" not in worker.init_kwargs(t, _cfg(device="cpu", backend="gloo"), "cpu")


def test_graph_default_follows_nccl_capture_support() -> None:
    def with_nccl(version):
        return SimpleNamespace(cuda=SimpleNamespace(CUDAGraph=object,
                                                    nccl=SimpleNamespace(version=lambda: version)))

    assert graph_capture_works(with_nccl((2, 27, 3)))
    assert not graph_capture_works(with_nccl((2, 9, 5)))
    assert graph_capture_works(with_nccl(20906)) and not graph_capture_works(with_nccl(2708))


def test_ranks_aggregate_two_ways() -> None:
    """Per call: the slowest rank, then percentiles. nccl-tests: burst means averaged."""
    gathered = [{"points": [{"times": [1.0, 5.0, 3.0], "burst_us": 4.0, "wrong": 0}],
                 "device_name": "G", "uuid": "u0", "pcie_gen": 5, "pcie_width": 16},
                {"points": [{"times": [2.0, 4.0, 9.0], "burst_us": 6.0, "wrong": 1}],
                 "device_name": "G", "uuid": "u1", "pcie_gen": 4, "pcie_width": 16}]  # fmt: skip
    out = worker._merge(_cfg(), 2, gathered)
    row = out["rows"][0]
    assert row["p50_us"] == 5.0 and row["burst_us"] == metrics.ranks_mean([4.0, 6.0]) == 5.0
    assert row["burst_busbw_gbps"] == pytest.approx(metrics.busbw_gbps("all_reduce", 14336,
                                                                       5.0, 2))  # fmt: skip
    assert row["wrong"] == 1 and out["gpu_uuids"] == ["u0", "u1"]
    assert out["pcie_gen_loaded"] == 4  # the slowest link under load bounds the collective


def test_gloo_run_stores_both_figures(store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--json", "--ops", "all_reduce,all_gather", "--tokens",
                  "1,2", "--hidden", "64", "--iters", "5", "--warmup", "1")  # fmt: skip
    assert res.code == 0, res.stderr
    assert res.json["graph_mode"] is False
    rows = query(store_path, "SELECT burst_us, nccl_tests_us, burst_busbw_gbps, timing, "
                 "gpus_used FROM v_comm_results")  # fmt: skip
    assert len(rows) == 4
    assert all(r[0] > 0 and r[1] == r[0] and r[2] > 0 for r in rows)
    assert {r[3] for r in rows} == {"host perf_counter"} and {r[4] for r in rows} == {None}
