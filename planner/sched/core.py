"""The benchmark's closed loop against one engine instance, step by step.

What every engine shares lives here: the client (N prompts, C in flight, a replacement sent
when a request's last token is out), the requests' bookkeeping (plain integer lists indexed by
request, decoding requests bucketed by the decode step they finish at), KV accounting, the
record of what each step holds, and when to stop. What a step holds is the engine adapter's
(planner.sched.vllm / sglang / trtllm): ``plan`` returns the prompt tokens each request
prefills and whether the running requests decode.

Time is counted in engine steps; nothing here knows how long a step takes (planner.cost
prices each recorded step shape). So the schedule of a benchmark does not depend on the
fitted GPU parameters and is computed once per workload.

- **Arrivals.** All C requests arrive at step 0. A replacement is sent when its client's
  previous request ends (the end of step s); it reaches the engine while step s + 1 runs
  (already scheduled: vLLM's async scheduling, SGLang's and TensorRT-LLM's overlap
  schedulers plan step s + 1 before step s's output is processed) and can be scheduled from
  step s + 2. Its TTFT counts from the start of step s + 1; the request path outside the GPU
  (HTTP, tokenizer, detokenizer) is added by the cost model.
- **Attention data parallel.** Each attention rank has its own scheduler and its clients
  (client j on rank j mod DP: a finished request's replacement goes where a slot just
  freed, as vLLM's least-loaded DP balancing sends it). The ranks step together (the MoE
  layers exchange every rank's tokens), so a step records the busiest rank.
- **Runs of decode steps.** While no rank has prompt work, steps differ only by the
  context growing one token; they are recorded as one segment until the next request ends or
  the adapter has something to do.
- **Steady state** (planner.sched.steady): once two windows of whole waves agree, the rest
  until the last window is stood for by the last agreeing one; ``converged_after`` says
  where.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import deque
from itertools import chain

import numpy as np

from planner.errors import PlannerInputError
from planner.sched.state import INF, Caps, Rank, Schedule
from planner.sched.steady import Windows

__all__ = ["INF", "Adapter", "Caps", "Rank", "Schedule", "Sim"]


class Sim:
    """The loop; an adapter (``sched``) decides each rank's step."""

    def __init__(self, sched, caps: Caps, clients: int, ranks: int, isl: np.ndarray,
                 osl: np.ndarray, converge: bool = True) -> None:  # fmt: skip
        self.sched, self.caps, self.clients = sched, caps, clients
        self.ranks = [Rank(i) for i in range(ranks)]
        self.isl = np.asarray(isl, dtype=np.int64).tolist()  # (Python ints: the loop's arithmetic)
        self.osl = np.asarray(osl, dtype=np.int64).tolist()
        n = len(self.isl)
        self.prompts = n
        self.target = list(self.isl)  # tokens to prefill (a preempted request recomputes more)
        self.done = [0] * n  # tokens prefilled so far
        self.produced = [0] * n  # output tokens so far
        self.fin = [0] * n  # decode clock the request ends at (while decoding)
        self.join = [0] * n  # (decode clock, KV held) when it joined decoding
        self.kv_join = [0] * n
        self.arrive = [0] * n
        self.first = [-1] * n
        self.end = [-1] * n
        self.weight = [1] * n
        self.rank_of = [0] * n
        self.step = 0
        self.blocked = 0
        self.sent = 0
        self.to_send = n  # requests the simulation sends (fewer once the windows agree)
        self.finished = 0
        self.segs: list[tuple] = []
        self.windows = Windows(self, clients, n, converge)
        # hooks an adapter leaves as Adapter's no-ops are not called
        self._advances = type(sched).advance is not Adapter.advance
        self._releases = type(sched).released is not Adapter.released
        self.sorted_ends = sched.sorted_ends
        # Whether a rank's KV can fill: below every client's longest prompt and output plus
        # an output's worth of decode tokens for each, the KV test of a decode run (steps
        # until the KV is full) can bind; above it, it never does and is skipped.
        self.kv_binds = caps.kv_tokens < clients * (max(self.isl, default=0)
                                                    + 2 * max(self.osl, default=0))
        for _ in range(min(clients, n)):
            self._send(self.ranks[self.sent % ranks], ready=0, seg=0)

    # -- the client ------------------------------------------------------------------------
    def _send(self, r: Rank, ready: int, seg: int) -> None:
        rid = self.sent
        self.sent += 1
        self.rank_of[rid] = r.idx
        self.arrive[rid] = seg
        r.inbox.append((ready, rid))

    # -- requests joining and leaving the decode batch ----------------------------------------
    def start_decoding(self, r: Rank, rid: int, seg: int) -> None:
        """``rid``'s prefill ended this step (its first, or next, token with it)."""
        if self.first[rid] < 0:
            self.first[rid] = seg
        self.produced[rid] += 1
        left = self.osl[rid] - self.produced[rid]
        if left <= 0:
            self._end(r, rid, seg, decoding=False)
            return
        fc = r.clock + left
        self.fin[rid] = fc
        self.join[rid] = r.clock
        self.kv_join[rid] = self.done[rid]
        r.n_dec += 1
        r.ctx_sum += self.isl[rid] + self.produced[rid]
        r.fin_sum += fc
        bucket = r.due.get(fc)
        if bucket is None:
            r.due[fc] = [rid]
            heapq.heappush(r.heap, fc)
        else:
            bucket.append(rid)
        if self.sorted_ends:
            i = bisect_right(r.fcs, fc)
            r.fcs.insert(i, fc)
            r.wholes.insert(i, self.isl[rid] + self.osl[rid])
            r.ends_changed += 1

    def kv_held(self, r: Rank, rid: int) -> int:
        """KV tokens a decoding request holds now."""
        return self.kv_join[rid] + r.clock - self.join[rid]

    def stop_decoding(self, r: Rank, rid: int) -> None:
        """Take a decoding request out of the batch (preempted or retracted)."""
        fc = self.fin[rid]
        r.due[fc].remove(rid)
        if self.sorted_ends:
            i = bisect_left(r.fcs, fc)
            del r.fcs[i], r.wholes[i]
            r.ends_changed += 1
        r.n_dec -= 1
        r.ctx_sum -= self.isl[rid] + self.produced[rid] + r.clock - self.join[rid]
        r.fin_sum -= fc
        self.produced[rid] += r.clock - self.join[rid]
        r.kv_used -= self.kv_held(r, rid)

    def preempt(self, r: Rank) -> bool:
        """Free the most recently started running request's KV and queue it first again, to
        be recomputed (prompt and outputs so far); False when nothing runs."""
        while r.order:
            rid = r.order.pop()
            if self.end[rid] >= 0 or self.done[rid] == 0 and rid not in r.partial:
                continue  # ended, or already back in the queue
            if rid in r.partial:
                r.partial.remove(rid)
                r.kv_used -= self.done[rid]
            else:
                self.stop_decoding(r, rid)
            self.done[rid] = 0
            self.target[rid] = self.isl[rid] + self.produced[rid]
            r.waiting.appendleft(rid)
            self.sched.released(self, r, rid)
            return True
        return False

    def make_room(self, r: Rank, tokens: int) -> bool:
        """Preempt until ``tokens`` more KV tokens fit; whether any request was preempted."""
        any_ = False
        while r.kv_used + tokens > self.caps.kv_tokens and (r.n_dec or r.partial):
            before = r.n_dec
            if not self.preempt(r):
                break
            any_ = True
            tokens -= before - r.n_dec
        return any_

    def _end(self, r: Rank, rid: int, seg: int, decoding: bool = True) -> None:
        self.end[rid] = seg
        if decoding:
            r.n_dec -= 1
            r.ctx_sum -= self.isl[rid] + self.osl[rid]
            r.fin_sum -= self.fin[rid]
            r.kv_used -= self.kv_held(r, rid)
        else:
            r.kv_used -= self.done[rid]
        self.sched.released(self, r, rid)
        self.finished += 1
        if self.sent < self.to_send:
            self._send(r, ready=self.step + 1, seg=seg + 1)
        self.windows.ended_one(rid)

    def _finish(self, r: Rank, seg: int) -> None:
        """The decoding requests ending at this clock (``_end``, inlined: the hot path)."""
        heap, due, clock = r.heap, r.due, r.clock
        isl, osl, kv_join, join, end = self.isl, self.osl, self.kv_join, self.join, self.end
        released = self.sched.released if self._releases else None
        ended_one = self.windows.ended_one
        if self.sorted_ends:  # they end first in the sorted lists
            k = bisect_right(r.fcs, clock)
            del r.fcs[:k], r.wholes[:k]
            r.ends_changed += 1
        while heap and heap[0] <= clock:
            fc = heapq.heappop(heap)
            for rid in due.pop(fc, ()):
                end[rid] = seg
                r.n_dec -= 1
                r.ctx_sum -= isl[rid] + osl[rid]
                r.fin_sum -= fc
                r.kv_used -= kv_join[rid] + clock - join[rid]
                if released is not None:
                    released(self, r, rid)
                self.finished += 1
                if self.sent < self.to_send:
                    nxt = self.sent
                    self.sent = nxt + 1
                    self.rank_of[nxt] = r.idx
                    self.arrive[nxt] = seg + 1
                    r.inbox.append((self.step + 1, nxt))
                ended_one(rid)

    # -- steps ------------------------------------------------------------------------------
    def run(self) -> Schedule:
        if len(self.ranks) == 1:
            self._run_one()
        else:
            self._run_ranks()
        return self._schedule()

    def _run_ranks(self) -> None:
        """``run`` for several attention ranks. One pass over the ranks plans those with
        requests to take and gathers what the step records (the busiest rank's batch and
        context, every rank's decode and prompt tokens, requests running and queued) and how
        many plain decode steps may follow; then the decoding ranks run the step, the
        planned ranks' prompts advance, and the requests whose last token came end. A
        rank's plan reads and changes only its own rank (and TRT-LLM's attention-DP counter,
        taken once per step by the first rank planned), so gathering each rank's figures
        right after its plan records what planning every rank first would. Most ranks only
        decode in most steps: they take the short branch."""
        ranks, sched = self.ranks, self.sched
        plan, quiet = sched.plan, sched.quiet
        advance = sched.advance if self._advances else None
        grows, kv_cap = sched.grows_kv and self.kv_binds, self.caps.kv_tokens
        segs = self.segs
        s_cum, t_cum, b_cum = 0, 0.0, 0.0  # steps, prompt tokens and batch so far
        while self.finished < self.to_send:
            now = self.step
            planned: list[tuple[Rank, list[tuple[int, int]]]] = []  # ranks with prompt work
            movers: list[Rank] = []  # ranks whose decoding requests decode this step
            tmax = tsum = b = b_ctx = moe = run = queued = 0
            k = INF  # plain decode steps before a request ends or a rank's KV runs out
            asked: list[Rank] = []  # ranks with requests to take: their ``quiet`` bounds k
            for r in ranks:
                if (r.waiting or r.inbox or r.partial
                        or grows and r.kv_used + r.n_dec > kv_cap):  # fmt: skip
                    prefill, dec = plan(self, r)
                    nd = r.n_dec
                    here = nd + len(r.partial)
                    if prefill:
                        planned.append((r, prefill))
                        t = 0
                        for _, tok in prefill:
                            t += tok
                        tsum += t
                        if t > tmax:
                            tmax = t
                        here = nd + max(len(prefill), len(r.partial))
                    if r.waiting or r.inbox:
                        queued += len(r.waiting) + len(r.inbox)
                        asked.append(r)
                    if here > run:
                        run = here
                    if not (nd and dec):
                        continue
                else:  # only decodes (if anything)
                    nd = r.n_dec
                    if not nd:
                        continue
                    if nd > run:
                        run = nd
                movers.append(r)
                moe += nd
                if nd > b:
                    b, b_ctx = nd, r.ctx_sum
                e = r.heap[0] - r.clock
                if e < k:
                    k = e
                if grows:
                    e = max((kv_cap - r.kv_used) // nd, 1)
                    if e < k:
                        k = e
            if not planned and not movers:
                if not any(r.inbox for r in ranks):
                    raise PlannerInputError(
                        "the engine cannot start a waiting request: its KV cache or "
                        "running-request cap leaves no room for one prompt and its output")
                # Nothing runs: the engine is idle until a request arrives, and takes it at
                # once (no step is in flight to wait for).
                for r in ranks:
                    r.inbox = deque((min(ready, now), rid) for ready, rid in r.inbox)
                continue
            if planned:
                k = 1
            else:
                for r in asked:
                    k = min(k, quiet(self, r))
                k = max(k, 1) if k < INF else 1
            ctx = b_ctx / b + (k - 1) / 2.0 if b else 0.0
            s_cum, t_cum, b_cum = s_cum + k, t_cum + tmax * k, b_cum + b * k
            segs.append((k, b, ctx, moe, tmax, tsum, run, queued, s_cum, t_cum, b_cum))
            seg = len(segs) - 1
            for r in movers:
                n = r.n_dec
                r.clock += k
                r.ctx_sum += n * k
                r.kv_used += n * k
            if advance is not None:
                for r in ranks:
                    advance(self, r, k if r in movers else 0)
            for r, prefill in planned:  # in rank order: a one-token output ends (and sends)
                self._prefilled(r, prefill, seg)
            self.step += k
            for r in movers:  # (no other rank's clock moved: its requests end later)
                if r.heap[0] <= r.clock:
                    self._finish(r, seg)

    def _prefilled(self, r: Rank, prefill: list[tuple[int, int]], seg: int) -> None:
        """The step's prompt tokens on ``r`` are in its KV; a prompt done starts decoding."""
        done, target, partial = self.done, self.target, r.partial
        for rid, tok in prefill:
            done[rid] += tok
            r.kv_used += tok
            if done[rid] >= target[rid]:
                if partial and rid in partial:
                    partial.remove(rid)
                self.start_decoding(r, rid, seg)
            elif rid not in partial:
                partial.append(rid)

    def _run_one(self) -> None:
        """``run`` for one attention rank: the same steps without the per-rank bookkeeping
        (most instances; the loop runs once per segment)."""
        r = self.ranks[0]
        sched = self.sched
        plan, quiet = sched.plan, sched.quiet
        advance = sched.advance if self._advances else None
        grows, kv_cap = sched.grows_kv and self.kv_binds, self.caps.kv_tokens
        heap, segs = r.heap, self.segs
        partial = r.partial
        nothing: list[tuple[int, int]] = []
        s_cum, t_cum, b_cum = 0, 0.0, 0.0  # steps, prompt tokens and batch so far
        while self.finished < self.to_send:
            if r.waiting or r.inbox or partial or grows and r.kv_used + r.n_dec > kv_cap:
                prefill, dec = plan(self, r)
            else:
                prefill, dec = nothing, True
            n = r.n_dec if dec else 0
            if prefill:
                k = 1
            elif n:
                k = heap[0] - r.clock
                if grows:
                    k = min(k, max((kv_cap - r.kv_used) // n, 1))
                if r.inbox or r.waiting:
                    k = min(k, quiet(self, r))
                k = max(k, 1)
            elif r.inbox:  # idle until a request arrives: it is taken at once
                r.inbox = deque((min(ready, self.step), rid) for ready, rid in r.inbox)
                continue
            else:
                raise PlannerInputError(
                    "the engine cannot start a waiting request: its KV cache or "
                    "running-request cap leaves no room for one prompt and its output")
            t = 0
            for _, tok in prefill:
                t += tok
            ctx = r.ctx_sum / n + (k - 1) / 2.0 if n else 0.0
            s_cum, t_cum, b_cum = s_cum + k, t_cum + t * k, b_cum + n * k
            segs.append((k, n, ctx, n, t, t, r.n_dec + max(len(prefill), len(partial)),
                         len(r.waiting) + len(r.inbox), s_cum, t_cum, b_cum))  # fmt: skip
            seg = len(segs) - 1
            if n:
                r.clock += k
                r.ctx_sum += n * k
                r.kv_used += n * k
            if advance is not None:
                advance(self, r, k if n else 0)
            if prefill:
                self._prefilled(r, prefill, seg)
            self.step += k
            if heap and heap[0] <= r.clock:
                self._finish(r, seg)

    def _schedule(self) -> Schedule:
        # (one pass over the flat rows: np.array on a list of tuples inspects every element)
        seg = np.fromiter(chain.from_iterable(self.segs), dtype=float,
                          count=11 * len(self.segs)).reshape(-1, 11)
        n = self.sent
        return Schedule(
            steps=seg[:, 0], batch=seg[:, 1], context=seg[:, 2], moe_tokens=seg[:, 3],
            prefill_max=seg[:, 4], prefill_sum=seg[:, 5], running=seg[:, 6], queued=seg[:, 7],
            arrive=np.array(self.arrive[:n]), first=np.array(self.first[:n]),
            end=np.array(self.end[:n]), isl=np.array(self.isl[:n]),
            osl=np.array(self.osl[:n]), weight=np.array(self.weight[:n]),
            prompts=self.prompts, clients=self.clients, ranks=len(self.ranks),
            converged_after=self.windows.converged_after, blocked=self.blocked)  # fmt: skip


class Adapter:
    """What every engine's scheduler does alike; each adapter overrides ``plan`` and what
    differs. ``plan(sim, rank)`` returns ([(request, prompt tokens this step)], whether the
    rank's decoding requests decode this step)."""

    grows_kv = True  # KV grows a token per decode step (False: reserved whole at admission)
    sorted_ends = False  # keep the decoding requests' end clocks sorted (Rank.fcs)

    def deliver(self, sim: Sim, r: Rank) -> None:
        """Requests that reached the engine join its waiting queue."""
        step, inbox, waiting = sim.step, r.inbox, r.waiting
        while inbox and inbox[0][0] <= step:
            waiting.append(inbox.popleft()[1])

    def quiet(self, sim: Sim, r: Rank) -> int:
        """Steps of plain decoding this rank can run before ``plan`` must be asked again
        (a request ending is the core's to see)."""
        return r.inbox[0][0] - sim.step if r.inbox else INF

    def advance(self, sim: Sim, r: Rank, decode_steps: int) -> None:
        """The rank ran ``decode_steps`` decode steps (0: a step without its decode)."""

    def released(self, sim: Sim, r: Rank, rid: int) -> None:
        """``rid`` left the running set (ended or preempted)."""

    def plan(self, sim: Sim, r: Rank) -> tuple[list[tuple[int, int]], bool]:
        raise NotImplementedError
