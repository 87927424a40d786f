"""A stand-in for the slice of ``torch.cuda`` the comm timers and graph holder touch.

The hardware boundary only: one stream simulated in microseconds. The host pays a dispatch
cost per launch; the GPU runs work in order, each item starting when both the stream is free
and the host has enqueued it. Events complete when the stream reaches them, so
``elapsed_time`` between back-to-back events on an idle GPU measures the host's dispatch
(the effect pytorch/pytorch and nccl-tests users see at small sizes), while a stream kept
busy by ``_sleep`` shows the kernels' own time. ``log`` records every call in order, which
the graph lifecycle tests read.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stream:
    """One CUDA stream on one GPU, in microseconds."""

    dispatch_us: float = 20.0  # host cost of launching one collective
    event_us: float = 2.0  # host cost of recording an event
    cycles_per_us: float = 1500.0  # GPU clock for _sleep
    host: float = 0.0
    free: float = 0.0  # when the GPU finishes everything enqueued so far
    log: list[str] = field(default_factory=list)

    def enqueue(self, gpu_us: float, host_us: float) -> float:
        self.host += host_us
        self.free = max(self.free, self.host) + gpu_us
        return self.free

    def kernel(self, gpu_us: float):
        """One launch: ``gpu_us`` on the GPU, ``dispatch_us`` on the host."""
        return lambda: self.enqueue(gpu_us, self.dispatch_us)


class FakeCuda:
    def __init__(self, stream: Stream) -> None:
        self.s = stream
        outer = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t: float | None = None

            def record(self, stream: Any = None) -> None:
                self.t = outer.s.enqueue(0.0, outer.s.event_us)

            def query(self) -> bool:
                return self.t is not None and self.t <= outer.s.host

            def synchronize(self) -> None:
                outer.s.host = max(outer.s.host, self.t or 0.0)

            def elapsed_time(self, end: Event) -> float:
                assert self.t is not None and end.t is not None
                return (end.t - self.t) / 1e3  # ms, as torch returns it

        class CUDAGraph:
            def __init__(self) -> None:
                self.call: Any = None
                outer.s.log.append("graph:new")

            def replay(self) -> None:
                outer.s.log.append("graph:replay")
                self.call()

            def reset(self) -> None:
                outer.s.log.append("graph:reset")

        self.Event, self.CUDAGraph = Event, CUDAGraph
        self._capturing: Any = None

    def _sleep(self, cycles: int) -> None:
        self.s.log.append("sleep")
        self.s.enqueue(cycles / self.s.cycles_per_us, 1.0)

    def synchronize(self) -> None:
        self.s.log.append("synchronize")
        self.s.host = max(self.s.host, self.s.free)

    def Stream(self) -> Any:  # noqa: N802 - torch's name
        return type("S", (), {"wait_stream": lambda _self, other: None})()

    def current_stream(self) -> Any:
        return self.Stream()

    @contextmanager
    def stream(self, s: Any):
        yield

    @contextmanager
    def graph(self, g: Any):
        self.s.log.append("capture:begin")
        self._capturing = g
        try:
            yield
        finally:
            self._capturing = None
        self.s.log.append("capture:end")

    def collective(self, gpu_us: float):
        """A collective call: runs (or, inside ``graph``, is captured for replay)."""
        kernel = self.s.kernel(gpu_us)

        def call() -> None:
            if self._capturing is not None:
                self._capturing.call = kernel
                return
            self.s.log.append("call")
            kernel()

        return call


def fake_torch(stream: Stream) -> Any:
    """An object with ``.cuda`` as the comm timing code uses it."""
    return type("Torch", (), {"cuda": FakeCuda(stream)})()
