"""What the step simulation keeps and returns: the engine's limits, one attention rank's
scheduler state and the recorded schedule."""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field

import numpy as np

INF = 1 << 60


@dataclass(frozen=True)
class Caps:
    """The engine's limits per attention rank, from its source defaults or as launched."""

    token_budget: int  # prompt + decode tokens one step may carry
    max_running: int  # requests running at once
    kv_tokens: int  # tokens the KV cache holds
    recv_interval: int = 1  # SGLang --scheduler-recv-interval
    batch_wait_iters: int = 0  # TensorRT-LLM batch_wait_timeout_iters
    batch_wait_ratio: float = 0.0  # TensorRT-LLM batch_wait_max_tokens_ratio
    adp_balance_iters: int = 0  # TensorRT-LLM attention_dp_config timeout_iters (0: off)


class Rank:
    """One attention rank's scheduler state."""

    __slots__ = ("idx", "waiting", "inbox", "partial", "heap", "due", "n_dec", "ctx_sum",
                 "fin_sum", "clock", "kv_used", "order", "counter", "reserved", "held",
                 "stuck", "stuck_until", "fcs", "wholes", "ends_changed", "scratch")  # fmt: skip

    def __init__(self, idx: int) -> None:
        self.idx = idx
        self.waiting: deque[int] = deque()  # arrived and seen by the scheduler, not started
        self.inbox: deque[tuple[int, int]] = deque()  # (schedulable from step, request)
        self.partial: list[int] = []  # prompts whose prefill is under way, in order
        self.heap: list[int] = []  # decode clocks at which decoding requests end
        self.due: dict[int, list[int]] = {}  # that clock -> the requests ending then
        self.n_dec = 0  # decoding requests
        self.ctx_sum = 0  # their context tokens together (the KV a decode step reads)
        self.fin_sum = 0  # their end clocks together (remaining outputs = fin_sum - n clock)
        self.clock = 0  # decode steps this rank ran
        self.kv_used = 0  # KV tokens held
        self.order: list[int] = []  # running requests in admission order (preemption)
        self.counter = 0  # the adapter's step counter (SGLang polls, TRT-LLM waits)
        self.reserved = 0  # TensorRT-LLM: KV tokens reserved to completion
        self.held = 0  # steps the adapter held prompts back
        self.stuck = -1  # a waiting request known not to fit before ``stuck_until`` (clock)
        self.stuck_until = 0  # or a running request leaves
        # the decoding requests' end clocks, sorted, and their whole lengths (isl + osl) in the
        # same order, kept only for an adapter that reads them (``Adapter.sorted_ends``), and
        # how many times they changed (what an adapter derived from them is stale when it moved)
        self.fcs = array("q")  # (int64 arrays: numpy reads them without a per-item copy)
        self.wholes = array("q")
        self.ends_changed = 0
        self.scratch = None  # the adapter's own per-rank state

    def running(self) -> int:
        return self.n_dec + len(self.partial)

    def queued(self) -> int:
        return len(self.waiting) + len(self.inbox)


@dataclass
class Schedule:
    """What the benchmark ran, in steps: one row per segment (``steps`` identical steps) and
    one per simulated request (its weight: how many measured requests it stands for)."""

    steps: np.ndarray
    batch: np.ndarray  # decoding requests on the busiest attention rank
    context: np.ndarray  # their mean context (tokens) over the segment
    moe_tokens: np.ndarray  # decode tokens of every rank together
    prefill_max: np.ndarray  # prompt tokens on the busiest rank
    prefill_sum: np.ndarray  # prompt tokens of every rank together
    running: np.ndarray  # requests in the step on the busiest attention rank
    queued: np.ndarray  # requests sent and not started, summed over ranks
    arrive: np.ndarray  # segment whose start the request was sent at
    first: np.ndarray  # segment at whose end its first token came
    end: np.ndarray  # segment at whose end its last token came
    isl: np.ndarray
    osl: np.ndarray
    weight: np.ndarray
    prompts: int  # N, the benchmark's
    clients: int
    ranks: int
    converged_after: int | None  # requests sent when two windows agreed (None: ran whole)
    blocked: int  # steps a waiting request could not start for KV room or the running cap
    reduced: dict = field(default_factory=dict, repr=False)  # planner.sched.metrics.reduced
    # what planner.sched.metrics computes once from the schedule whatever the step times
    derived: dict = field(default_factory=dict, repr=False)

    @property
    def simulated(self) -> int:
        return int(self.isl.size)

