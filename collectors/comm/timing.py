"""How one rank times a burst of collective calls: per call, and the burst as a whole.

Two timers share one interface so the CPU (gloo) and CUDA (NCCL) paths feed the same
aggregation (``collectors.comm.metrics``):

- ``CpuTimer``: ``perf_counter_ns`` around each call (gloo calls return when done).
- ``CudaTimer``: GPU time from CUDA events. Events recorded back to back around each call
  on an idle GPU measure the host's dispatch (10-30 us a call), not the collective, at
  decode sizes. So every burst starts with a *pre-roll*: ``torch.cuda._sleep`` keeps the
  stream busy while the host enqueues the whole burst, and each call then starts the moment
  the previous one ends. If the GPU finished the pre-roll before the host finished
  enqueueing, the pre-roll was too short: it is doubled and the burst repeated.
  The nccl-tests-style figure is a second pass with one event pair around the whole burst
  (nccl-tests times ``iters`` back-to-back launches and divides: NVIDIA/nccl-tests
  v2.13+ src/common.cu ``BenchTime``: ``deltaSec = tim.elapsed() / (iters*agg_iters)``).

``Graphs`` owns CUDA graphs captured for ``--graph``: they are reset before the process
group is destroyed, because ``destroy_process_group`` hangs while a graph that captured
NCCL collectives is alive (pytorch/pytorch#115388, open on torch 2.1-2.13).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

PREROLL_MIN_US = 2_000.0
PREROLL_PER_CALL_US = 100.0  # >3x the host's dispatch cost of one NCCL call + two events
PREROLL_MAX_US = 500_000.0
CALIBRATE_CYCLES = 2_000_000


@dataclass(frozen=True)
class Burst:
    per_call_us: list[float]  # one time per call (GPU time on CUDA)
    burst_us: float  # one timer around the whole burst / calls (nccl-tests' figure)


class Timer(Protocol):
    def burst(self, call: Callable[[], Any], iters: int) -> Burst: ...


class CpuTimer:
    """Host wall time: gloo collectives are synchronous, so a call's return is its end."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock

    def burst(self, call: Callable[[], Any], iters: int) -> Burst:
        times = []
        for _ in range(iters):
            t0 = self.clock()
            call()
            times.append((self.clock() - t0) / 1e3)
        t0 = self.clock()
        for _ in range(iters):
            call()
        return Burst(times, (self.clock() - t0) / 1e3 / iters)


class CudaTimer:
    """GPU time from CUDA events behind a pre-roll (see the module docstring)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.cycles_per_us = self._calibrate()
        self.preroll_extra = 1.0  # doubled each time a pre-roll ran out
        self.short_prerolls = 0

    def _event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def _calibrate(self) -> float:
        """``_sleep`` counts GPU clock cycles: measure how many make a microsecond."""
        start, end = self._event(), self._event()
        start.record()
        self.torch.cuda._sleep(CALIBRATE_CYCLES)
        end.record()
        end.synchronize()
        us = max(start.elapsed_time(end) * 1e3, 1.0)
        return CALIBRATE_CYCLES / us

    def preroll_us(self, iters: int) -> float:
        wanted = (PREROLL_MIN_US + PREROLL_PER_CALL_US * iters) * self.preroll_extra
        return min(wanted, PREROLL_MAX_US)

    def _run(self, call: Callable[[], Any], iters: int, per_call: bool) -> tuple[list[float], bool]:
        """One burst behind a pre-roll; returns times (us) and whether the pre-roll held."""
        cuda = self.torch.cuda
        marks = [self._event() for _ in range(iters + 1 if per_call else 2)]
        preroll_end = cuda.Event()  # no timing: only queried
        cuda._sleep(int(self.preroll_us(iters) * self.cycles_per_us))
        preroll_end.record()
        marks[0].record()
        for i in range(iters):
            call()
            if per_call:
                marks[i + 1].record()
        if not per_call:
            marks[1].record()
        held = not preroll_end.query()  # still sleeping: the host enqueued everything in time
        cuda.synchronize()
        times = [a.elapsed_time(b) * 1e3 for a, b in zip(marks, marks[1:], strict=False)]
        return times, held

    def burst(self, call: Callable[[], Any], iters: int) -> Burst:
        per_call = burst = None
        for _ in range(8):
            per_call, held_a = self._run(call, iters, per_call=True)
            burst, held_b = self._run(call, iters, per_call=False)
            if held_a and held_b:
                break
            self.short_prerolls += 1  # the run's message counts them (comm.run)
            self.preroll_extra *= 2
        assert per_call is not None and burst is not None
        return Burst(per_call, burst[0] / iters)


class Graphs:
    """CUDA graphs captured for ``--graph``, released before the process group goes.

    pytorch/pytorch#115388 (torch 2.1 to 2.13, torch/csrc/distributed/c10d/
    ProcessGroupNCCL.cpp): ``destroy_process_group()`` waits on NCCL work a live captured
    graph still references, so it hangs until the rank timeout. ``release`` resets every
    graph (``CUDAGraph.reset``, torch/cuda/graphs.py) and synchronizes; the worker calls it
    after each point and again before ``destroy_process_group``.
    """

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.live: list[Any] = []

    def capture(self, call: Callable[[], Any]) -> Callable[[], Any]:
        """Capture one ``call`` (decode runs collectives this way); return its replay."""
        cuda = self.torch.cuda
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            call()  # warm up on a side stream before capture, as torch/cuda/graphs.py asks
        cuda.current_stream().wait_stream(side)
        graph = cuda.CUDAGraph()
        self.live.append(graph)  # owned here from the start: released even if capture fails
        with cuda.graph(graph):
            call()
        cuda.synchronize()
        return graph.replay

    def release(self) -> None:
        if not self.live:
            return
        for graph in self.live:
            graph.reset()
        self.live.clear()
        self.torch.cuda.synchronize()


def teardown(graphs: Graphs | None, dist: Any) -> None:
    """Graphs first, then the process group (the order pytorch#115388 needs)."""
    try:
        if graphs is not None:
            graphs.release()
    finally:
        dist.destroy_process_group()
