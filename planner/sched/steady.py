"""When the benchmark's steady state has converged, and what stands in for the rest.

Requests are grouped in windows of whole waves (at least MIN_WINDOW requests). Once two
windows after the first agree on the schedule (TTFT in steps, steps per output token, prompt
tokens per step while decoding and while waiting, decode batch; within TOLERANCE), the windows
until the last are not simulated: the last agreeing window stands for them (its requests
weigh more) and the run resumes for the final window and the drain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TOLERANCE = 0.02  # relative agreement of two windows' schedules
MIN_WINDOW = 32  # requests per convergence window, at least (whole waves of C)
# absolute slack per statistic: TTFT steps, steps per token, prompt tokens per step while
# decoding and while waiting, decode batch
SLACK = (0.5, 0.02, 1.0, 1.0, 0.5)


class Windows:
    """The convergence windows of one simulation."""

    def __init__(self, sim: Any, clients: int, n: int, converge: bool) -> None:
        # ``sim``: the planner.sched.core.Sim whose requests these are
        self.sim = sim
        self.size = clients * -(-MIN_WINDOW // clients)
        count = -(-n // self.size)
        self.ended = [0] * count  # requests of each window that ended
        self.total = [min(self.size, n - w * self.size) for w in range(count)]
        self.stats: dict[int, tuple] = {}
        self.converge = converge
        self.converged_after: int | None = None

    def ended_one(self, rid: int) -> None:
        w = rid // self.size
        self.ended[w] += 1
        if self.ended[w] >= self.total[w]:
            self._done(w)

    def _done(self, w: int) -> None:
        sim = self.sim
        if (not self.converge or self.converged_after is not None or w < 1
                or sim.to_send - sim.sent <= 2 * self.size):  # fmt: skip
            return  # nothing left to stand in for
        self.stats[w] = self._stats(w)
        prev = self.stats.get(w - 1)
        if w < 2 or prev is None:
            return
        if all(abs(a - b) <= TOLERANCE * max(abs(a), abs(b)) + tol
               for a, b, tol in zip(self.stats[w], prev, SLACK, strict=True)):  # fmt: skip
            skip = (sim.to_send - sim.sent - self.size) // self.size
            self.converged_after = sim.sent
            sim.to_send -= skip * self.size
            lo = w * self.size
            for i in range(lo, lo + self.size):
                sim.weight[i] += skip
            last = sim.to_send - 1  # the windows now end earlier
            self.total[last // self.size] = last % self.size + 1

    def _stats(self, w: int) -> tuple[float, ...]:
        """A window's schedule: TTFT steps, steps per output token, prompt tokens per step
        while decoding and during TTFT, decode batch (means over its requests)."""
        sim = self.sim
        lo = w * self.size
        hi = min(lo + self.size, sim.sent)
        segs = sim.segs
        zero = (0, 0.0, 0.0)

        def before(js: list[int]) -> np.ndarray:
            """Steps, prompt tokens and batch summed over the segments before each of ``js``
            (each segment carries the running totals after it: only these rows are read,
            not the whole schedule, which grows with every window)."""
            return np.array([segs[j - 1][8:11] if j else zero for j in js], dtype=float)

        a = before(sim.arrive[lo:hi])
        f = before([j + 1 for j in sim.first[lo:hi]])
        e = before([j + 1 for j in sim.end[lo:hi]])
        osl = np.asarray(sim.osl[lo:hi], dtype=float)
        span = np.maximum(e[:, 0] - f[:, 0], 1e-9)
        dec = e[:, 0] > f[:, 0]
        return (float(np.mean(f[:, 0] - a[:, 0])),
                float(np.mean(np.where(dec, span / np.maximum(osl - 1, 1), 0.0))),
                float(np.mean(np.where(dec, (e[:, 1] - f[:, 1]) / span, 0.0))),
                float(np.mean(f[:, 1] - a[:, 1])),
                float(np.mean(np.where(dec, (e[:, 2] - f[:, 2]) / span, 0.0))))  # fmt: skip
