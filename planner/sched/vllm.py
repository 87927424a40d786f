"""vLLM V1's scheduler, step by step (vllm-project/vllm@v0.34.0, vllm/v1/core/sched/scheduler.py
``Scheduler.schedule`` unless named otherwise).

- One token budget per step, ``max_num_batched_tokens`` (vllm/engine/arg_utils.py
  ``EngineArgs.get_batch_defaults``: 8192 on GPUs of 70 GiB and more but A100, else 2048;
  planner.specs.engines), shared by the RUNNING list first, then the WAITING queue.
- RUNNING, in order: a decoding request takes one token; a request whose prompt is part-way
  through takes what is left of its prompt, cut to the budget left (chunked prefill is on
  for generative models: ``_set_default_chunked_prefill_and_prefix_caching_args``;
  ``long_prefill_token_threshold`` 0, no cap). So prompt chunks ride in decode steps: mixed
  steps are the normal case.
- Each running request's new tokens need KV blocks (``kv_cache_manager.allocate_slots``);
  when they do not fit, the last running request is preempted (``_preempt_request``:
  recompute, its blocks freed, ``num_computed_tokens`` 0, put first in WAITING), until they
  fit or it preempts itself.
- WAITING is scheduled only if nothing was preempted this step (``if not preempted_reqs``),
  FCFS (``SchedulerConfig.policy`` "fcfs"), while the budget lasts and fewer than
  ``max_num_seqs`` run (1024 on those GPUs, else 256); a request starts only if its whole
  prompt fits in the free blocks (``allocate_slots(full_sequence_must_fit=...)``,
  ``scheduler_reserve_full_isl`` True), else the queue waits at its head (``break``); its
  prompt is cut to the budget left and continues in the next step.
- Decode-only steps run a full CUDA graph (``cudagraph_mode`` FULL_AND_PIECEWISE, up to the
  capture size), mixed ones piecewise graphs; with async scheduling (on by default,
  vllm/config/vllm.py ``VllmConfig.__post_init__``) the CPU's work overlaps the GPU's, so a
  step costs its kernels (planner.cost.step).
"""

from __future__ import annotations

from planner.sched.core import Adapter, Sim
from planner.sched.state import Rank


class VllmScheduler(Adapter):
    def plan(self, sim: Sim, r: Rank) -> tuple[list[tuple[int, int]], bool]:
        self.deliver(sim, r)
        caps = sim.caps
        budget = caps.token_budget - r.n_dec  # each running decode takes one token
        # The decode tokens' KV: preempt the last running request until they fit.
        preempted = sim.make_room(r, r.n_dec) if r.n_dec else False
        if not r.partial and not r.waiting:  # no prompt to schedule (a request on its way)
            return [], r.n_dec > 0
        budget = caps.token_budget - r.n_dec
        out: list[tuple[int, int]] = []
        done, target = sim.done, sim.target
        for rid in r.partial:  # RUNNING prompts part-way through, in order
            tok = min(target[rid] - done[rid], budget)
            if tok > 0:
                out.append((rid, tok))
                budget -= tok
        if preempted:
            return out, r.n_dec > 0
        running = r.n_dec + len(r.partial)
        # KV still owed to prompts part-way through (their whole prompt was checked at start)
        owed = sum(target[rid] - done[rid] for rid in r.partial)
        free = caps.kv_tokens - r.kv_used - owed
        waiting = r.waiting
        while waiting and budget > 0:
            if running >= caps.max_running:
                sim.blocked += 1
                break
            rid = waiting[0]
            need = target[rid] - done[rid]
            if need > free:  # the whole prompt must fit in the free blocks
                sim.blocked += 1
                break
            waiting.popleft()
            tok = min(need, budget)
            out.append((rid, tok))
            r.order.append(rid)
            budget -= tok
            free -= need
            running += 1
        return out, r.n_dec > 0
