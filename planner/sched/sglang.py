"""SGLang's scheduler, step by step (sgl-project/sglang@v0.5.23, python/sglang/srt/managers/
scheduler.py ``get_next_batch_to_run`` and schedule_policy.py ``PrefillAdder`` unless named
otherwise).

- **Prefill first.** Each loop builds a prefill (extend) batch when requests wait and one
  can start; if it forms, that step is prefill only and the running requests do not decode
  in it ("Run prefill first if possible"; ``enable_mixed_chunk`` False by default).
  Otherwise every running request decodes.
- **The prefill batch.** The one chunked request continues first; then the waiting queue,
  FCFS (``schedule_policy`` "fcfs"), while fewer than ``max_running_requests`` run and the
  chunk budget lasts (``chunked_prefill_size``: 8192 below 160 GiB of GPU memory, 16384
  above, split over attention-DP ranks; planner.specs.engines). A prompt longer than the
  chunk left is cut to it and becomes the one chunked request, which ends the batch.
- **KV admission for ``ignore_eos`` requests** (every benchmark client sends them; the
  radix cache off as InferenceX runs it, ``--disable-radix-cache``):
  ``PrefillAdder.add_one_req_ignore_eos``. The running requests, those already in the batch
  and the candidate are sorted by tokens left to generate; walking them, the free tokens
  (after the batch's prompts) plus what the requests before have freed, less each one's
  remaining tokens times the requests still running then, must stay above one token per
  request (``IGNORE_EOS_RESERVE_TOKENS``). So a request starts only when every running
  request can finish without retraction; the queue waits at its head otherwise.
- **Polling** (scheduler_recv_skipper.py ``SchedulerRecvSkipper``): with
  ``--scheduler-recv-interval R`` new requests are received only when a counter reaches R;
  a decode step adds 1, a prefill batch 1000 (so the loop after a prefill polls), and an
  idle engine polls every loop.
- **Retraction** (``update_running_batch``, ``ScheduleBatch.retract_decode``) when a decode
  step's tokens do not fit: the admission rule above leaves none for these clients; a
  retracted request would be recomputed like vLLM's preemption.
- ``max_running_requests`` unset: min(clamp(KV tokens / context length x 512, 2048, 4096),
  KV tokens / 2) per attention-DP worker (srt/mem_cache/kv_cache_configurator.py
  ``resolve_max_num_reqs``).
"""

from __future__ import annotations

import math

import numpy as np

from planner.sched.core import Adapter, Sim
from planner.sched.state import INF, Rank

RESERVE_TOKENS = 1  # schedule_policy.py IGNORE_EOS_RESERVE_TOKENS
PREFILL_WEIGHT = 1000  # what a prefill batch adds to the poll counter


class SglangScheduler(Adapter):
    sorted_ends = True  # the admission test walks the running requests by tokens left
    def deliver(self, sim: Sim, r: Rank) -> None:
        interval = sim.caps.recv_interval
        if interval > 1 and (r.n_dec or r.partial):  # busy: poll when the counter reaches R
            if r.counter < interval:
                return
            r.counter = 0
        super().deliver(sim, r)

    def quiet(self, sim: Sim, r: Rank) -> int:
        if r.waiting and r.waiting[0] == r.stuck:
            return max(r.stuck_until - r.clock, 1)
        if not r.inbox:
            return INF
        ready = r.inbox[0][0] - sim.step
        interval = sim.caps.recv_interval
        return max(ready, interval - r.counter) if interval > 1 else ready

    def released(self, sim: Sim, r: Rank, rid: int) -> None:
        r.stuck = -1

    def advance(self, sim: Sim, r: Rank, decode_steps: int) -> None:
        """Each loop polls first when the counter has reached R (and resets it), then adds
        its batch's weight; over ``decode_steps`` loops the polls found nothing (``quiet``
        ends a run at a poll that would find something)."""
        interval = sim.caps.recv_interval
        if interval > 1 and decode_steps:
            c = (0 if r.counter >= interval else r.counter) + decode_steps
            r.counter = c if c <= interval else (c - interval - 1) % interval + 1

    def plan(self, sim: Sim, r: Rank) -> tuple[list[tuple[int, int]], bool]:
        self.deliver(sim, r)
        caps = sim.caps
        chunk = caps.token_budget
        done, target = sim.done, sim.target
        out: list[tuple[int, int]] = []
        if r.partial:  # the chunked request continues first
            rid = r.partial[0]
            tok = min(target[rid] - done[rid], chunk)
            out.append((rid, tok))
            chunk -= tok
        running = r.n_dec + len(r.partial)
        batch: list[int] = []
        waiting = r.waiting
        while waiting and chunk > 0:
            if running + len(batch) >= caps.max_running:
                sim.blocked += 1
                break
            rid = waiting[0]
            if rid == r.stuck and r.clock < r.stuck_until:
                sim.blocked += 1
                break
            wait = self._fits(sim, r, rid, batch, caps.token_budget - chunk)
            if wait:  # known not to fit for ``wait`` decode steps (or until one leaves)
                if not batch:
                    r.stuck, r.stuck_until = rid, r.clock + wait
                sim.blocked += 1
                break
            waiting.popleft()
            need = target[rid] - done[rid]
            tok = min(need, chunk)
            out.append((rid, tok))
            r.order.append(rid)
            batch.append(rid)
            chunk -= tok
        if out:
            r.counter += PREFILL_WEIGHT
            return out, False
        if r.n_dec:
            sim.make_room(r, r.n_dec)  # retraction (none under the admission above)
        return out, r.n_dec > 0

    @staticmethod
    def _fits(sim: Sim, r: Rank, rid: int, batch: list[int], batch_tokens: int) -> int:
        """``add_one_req_ignore_eos``: 0 when every running request can still finish with
        ``rid`` started too; else the decode steps until it could (INF: not before a
        running request leaves). Each decode step takes a token from every running request's
        remaining and adds one to what it holds, so a state ahead of the candidate gains a
        token of margin per step for each not-yet-running request after it."""
        isl, osl, produced, target, done = sim.isl, sim.osl, sim.produced, sim.target, sim.done
        cur_rem = sim.caps.kv_tokens - r.kv_used - batch_tokens - (target[rid] - done[rid])
        # tokens left to generate: the decoding ones (their end clocks less now), the batch's
        # and the candidate's
        news = [*batch, rid]
        new_left = [osl[b] - produced[b] for b in news]
        left = r.fin_sum - r.n_dec * r.clock + sum(new_left)
        n = r.n_dec + len(news)
        if cur_rem - left > RESERVE_TOKENS * n:
            return 0  # fits even if nothing ever ended
        # The request that ends first binds most often: its test alone, from the lists.
        lowest = min(new_left)
        first_is_running = bool(r.fcs) and r.fcs[0] - r.clock <= lowest
        first = r.fcs[0] - r.clock if first_is_running else lowest
        m0 = cur_rem - (first + RESERVE_TOKENS) * n
        if m0 <= 0:
            if batch or not first_is_running:
                return INF
            return -m0 // len(news) + 1
        held = [isl[b] + produced[b] for b in news]
        if not batch:  # the candidate alone: from the running set's summary
            return _Summary.of(r).wait(r.clock, cur_rem, lowest, held[0])
        return _Summary.of(r).wait_batch(r.clock, cur_rem, new_left, held)


class _Summary:
    """The admission test's terms for a rank's decoding requests, kept until the set
    changes (``Rank.ends_changed``). Sorted by tokens left (``left``), with ``occ`` tokens
    held, F_i = the tokens held by those before i and d of them: A_i = F_i - (left_i + 1)(d - i).
    A candidate placed at p (c tokens left, o held) passes when, with ``cur`` free tokens
    after its prompt, cur + A_i - (left_i + 1) > 0 for i < p, cur + F_p - (c + 1)(d + 1 - p) > 0
    and cur + o + A_i > 0 for i >= p. A decode step adds d to every A_i and takes d from cur
    (and one from each left): the summary holds, shifted; the terms before p gain one."""

    __slots__ = ("changed", "clock", "left", "grow", "f", "a", "_before", "_after", "d")

    @classmethod
    def of(cls, r: Rank) -> _Summary:
        got = r.scratch
        if got is None or got.changed != r.ends_changed:
            got = r.scratch = cls(r)
        return got

    def __init__(self, r: Rank) -> None:
        self.changed, self.clock = r.ends_changed, r.clock
        self.left = np.array(r.fcs, dtype=np.int64) - r.clock
        wholes = np.array(r.wholes, dtype=np.int64)
        d = self.d = int(self.left.size)
        self.f = np.zeros(d + 1, dtype=np.int64)  # F_i for i = 0..d
        (wholes - self.left).cumsum(out=self.f[1:])  # (held = whole length - tokens left)
        self.grow = self.left + RESERVE_TOKENS  # what each running request still needs, + 1
        self.a = self.f[:-1] - self.grow * np.arange(d, 0, -1)
        self._before = self._after = None  # (prefix and suffix minima, when first asked)

    @property
    def before(self) -> np.ndarray:  # min of A_j - left_j - 1 over j <= i
        if self._before is None:
            self._before = np.minimum.accumulate(self.a - self.grow) if self.d else self.a
        return self._before

    @property
    def after(self) -> np.ndarray:  # min of A_j over j >= i
        if self._after is None:
            self._after = np.minimum.accumulate(self.a[::-1])[::-1] if self.d else self.a
        return self._after

    def wait(self, clock: int, cur: int, left_c: int, occ_c: int) -> int:
        k, d = clock - self.clock, self.d
        p = int(self.left.searchsorted(left_c + k, side="right"))
        m_c = cur + self.f[p] + p * k - (left_c + RESERVE_TOKENS) * (d + 1 - p)
        m_after = cur + occ_c + self.after[p] + k * d if p < d else INF
        if m_c <= 0 or m_after <= 0:
            return INF  # no decode step helps these: a running request must leave
        m_before = cur + self.before[p - 1] + k * (d + 1) if p > 0 else INF
        return 0 if m_before > 0 else int(-m_before) + 1

    def wait_batch(self, clock: int, cur: int, lefts: list[int], held: list[int]) -> int:
        """The walk for several new requests (the batch so far and the candidate: tokens
        left ``lefts``, held ``held``), placed among the running ones by tokens left (after
        equal running ones, in their order among themselves). With s of them before running
        request i and t = m - s after, its margin is cur + (their held tokens) + A_i -
        (left_i + 1) t + k (d + t), k decode steps after the summary; a new one's is its
        free tokens plus all held before it less its growth for every request from it on. A
        failing new request, or running one with none after it, waits for a request to
        leave (INF); a running one with t after it gains t tokens of margin a step."""
        k, d = clock - self.clock, self.d
        new = sorted(zip(lefts, held, strict=True), key=lambda x: x[0])  # stable, as the walk
        m = len(new)
        at = self.left.searchsorted([c + k for c, _ in new], side="right").tolist()
        held_before = [0]  # tokens held by the new requests before each
        for j, (c, o) in enumerate(new):
            p = at[j]
            f_p = int(self.f[p]) + p * k
            if cur + f_p + held_before[j] - (c + RESERVE_TOKENS) * (d + m - p - j) <= 0:
                return INF
            held_before.append(held_before[j] + o)
        if not d:
            return 0
        # the running requests, in runs between the new ones: each run's lowest margin
        edges = [0, *at, d]
        runs = [s for s in range(m + 1) if edges[s] < edges[s + 1]]
        later = np.arange(m, -1, -1).repeat([edges[s + 1] - edges[s] for s in range(m + 1)])
        lows = np.minimum.reduceat(self.a - self.grow * later, [edges[s] for s in runs]).tolist()
        wait = 0
        for s, low in zip(runs, lows, strict=True):
            t = m - s
            margin = cur + held_before[s] + low + k * (d + t)
            if margin <= 0:
                if not t:
                    return INF
                wait = max(wait, math.floor(-margin / t) + 1)
        return wait
