"""TensorRT-LLM's scheduler (PyTorch backend), step by step.

- **Capacity** (NVIDIA/TensorRT-LLM@5f480b7a6fec tensorrt_llm/_torch/pyexecutor/scheduler/
  scheduler.py ``SimpleScheduler.schedule_request``; default policy ``GUARANTEED_NO_EVICT``,
  @7b437aaa73bf tensorrt_llm/llmapi/llm_args.py ``SchedulerConfig``, set explicitly by
  ``trtllm-serve``): every request in progress keeps the KV blocks of its whole sequence,
  prompt and maximum new tokens, reserved to completion; new requests are admitted in order
  only while their whole sequence fits too, and the first that does not stops admission.
- **Micro-batch** (``PyMicroBatchScheduler.schedule``): the active requests are walked in
  order against one ``max_num_tokens`` budget (8192 by default; planner.specs.engines) and
  ``max_batch_size`` (2048); a generation request costs one token; a context request, with
  chunked prefill off (``enable_chunked_prefill`` False), needs its whole prompt to fit, else
  the walk stops. Context and generation requests share the step (in-flight batching).
- **Batch waiting** (tensorrt_llm/_torch/pyexecutor/py_executor.py ``_waiting_requests``,
  off by default; only without attention DP and while generation requests run): the step's
  context requests are held, a counter counting each held step, until it reaches
  ``batch_wait_timeout_iters`` or their tokens and the generation requests' reach
  ``batch_wait_max_tokens_ratio`` x ``max_num_tokens``; then all go and the counter resets.
- **Attention-DP balance** (py_executor.py ``_balance_adp_requests``, with
  ``attention_dp_config.enable_balance``; off by default): every rank takes the same decision
  from the all-gathered counts, so the counter is one for the instance. A step where every
  rank has a context request releases them and zeroes the counter; any other step holds them
  and adds one to it, also a step where no rank has one, and when it reaches
  ``timeout_iters`` (or some rank has nothing to decode) the step releases and zeroes it. So
  the counter keeps cycling while ranks only decode, and a prompt arriving then waits for
  the cycle's end, not a whole ``timeout_iters``.
- CUDA graphs only for steps without context requests (``can_run_cuda_graph``); the overlap
  scheduler (on by default) hides the CPU's per-step work.
"""

from __future__ import annotations

from planner.sched.core import Adapter, Sim
from planner.sched.state import Rank


class TrtllmScheduler(Adapter):
    grows_kv = False  # reserved to completion at admission

    def __init__(self) -> None:
        self.adp_count = 0  # the attention-DP balance counter (one for every rank)
        self.adp_step = -1  # the step it was last brought up to date at
        self.adp_release = True  # that step's decision

    def released(self, sim: Sim, r: Rank, rid: int) -> None:
        r.reserved -= sim.isl[rid] + sim.osl[rid]

    def advance(self, sim: Sim, r: Rank, decode_steps: int) -> None:
        if r.held and decode_steps > 1:  # each held step counts
            r.held += decode_steps - 1

    def quiet(self, sim: Sim, r: Rank) -> int:
        k = super().quiet(sim, r)
        caps = sim.caps
        if r.waiting and caps.batch_wait_iters and caps.batch_wait_ratio:
            k = min(k, max(caps.batch_wait_iters - r.held, 1))
        if r.waiting and caps.adp_balance_iters and len(sim.ranks) > 1:
            k = min(k, max(caps.adp_balance_iters - self.adp_count, 1))
        return k

    def plan(self, sim: Sim, r: Rank) -> tuple[list[tuple[int, int]], bool]:
        self.deliver(sim, r)
        caps = sim.caps
        if r.waiting and self._hold(sim, r):
            r.held += 1
            return [], r.n_dec > 0
        r.held = 0
        budget = caps.token_budget - r.n_dec
        running = r.n_dec
        out: list[tuple[int, int]] = []
        isl, osl, waiting = sim.isl, sim.osl, r.waiting
        while waiting:
            rid = waiting[0]
            whole = isl[rid] + osl[rid]
            if running >= caps.max_running or r.reserved + whole > caps.kv_tokens:
                sim.blocked += 1
                break
            if isl[rid] > budget:  # no chunking: the whole prompt in this step, or wait
                break
            waiting.popleft()
            r.reserved += whole
            r.order.append(rid)
            out.append((rid, isl[rid]))
            budget -= isl[rid]
            running += 1
        return out, r.n_dec > 0

    def _hold(self, sim: Sim, r: Rank) -> bool:
        """Whether batch waiting or attention-DP balancing holds this rank's prompts now."""
        caps = sim.caps
        if len(sim.ranks) > 1:  # (a rank with nothing to decode releases every rank's)
            return bool(caps.adp_balance_iters) and not self._adp_release(sim)
        if not r.n_dec:
            return False
        if not (caps.batch_wait_iters and caps.batch_wait_ratio) or r.held >= caps.batch_wait_iters:
            return False
        tokens = sum(sim.isl[rid] for rid in r.waiting) + r.n_dec
        return tokens < caps.batch_wait_ratio * caps.token_budget

    def _adp_release(self, sim: Sim) -> bool:
        """This step's attention-DP balance decision (taken once for every rank)."""
        if self.adp_step == sim.step:
            return self.adp_release
        timeout = sim.caps.adp_balance_iters
        if self.adp_step >= 0:  # the steps no rank was planned at: no context request, held
            self.adp_count = (self.adp_count + sim.step - self.adp_step - 1) % timeout
        self.adp_step = sim.step
        ranks = sim.ranks
        if all((o.waiting or o.inbox and o.inbox[0][0] <= sim.step)
               and o.n_dec < sim.caps.max_running for o in ranks):  # fmt: skip
            self.adp_count, self.adp_release = 0, True
            return True
        self.adp_count += 1
        self.adp_release = self.adp_count >= timeout or not all(o.n_dec for o in ranks)
        if self.adp_release:
            self.adp_count = 0
        return self.adp_release

