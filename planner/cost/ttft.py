"""TTFT of a closed-loop client against an engine's scheduler: admission, waves, chunks.

The client is ``vllm bench serve --max-concurrency C --num-prompts N`` with fixed random
lengths (I in, O out): all C requests arrive at once, then each finished request is
replaced. Per attention rank (C / DP clients, B of them admitted by the KV cache):

- **First wave**: B prompts at t = 0 are prefilled FCFS in steps of the engine's token
  budget (planner.specs.engines): request j's first token comes at the end of step
  m_j = ceil((j + 1) I / budget) (whole prompts per step when the engine does not chunk);
  a step costs its fixed part (weights, kernels) plus its prompt tokens x t_tok (compute
  and the prompt activations' collectives, planner.cost.step_comm.prefill_comm).
- **Later waves** drift apart (each request's decode overlaps a different share of other
  prompts), so a replacement meets a running batch: it waits half a step, its own prefill
  (chunked into what the decode tokens leave of the budget, or a prefill batch of its own
  on SGLang), and the other prompts in the queue (M/D/1 at the prefill utilisation).
- Mean over the run: (first wave + (N / C - 1) x later) / (N / C), where N / C is the
  client's prompts per concurrency slot.
- **Admission**: past the KV capacity, a request waits for (C / B - 1) requests' lifetimes.
- **TensorRT-LLM's attention-DP balance** (``attention_dp_config.enable_balance``, off by
  default): a later prompt waits until every rank has one, or for the scheduler's timeout.
- **SGLang's ``--scheduler-recv-interval R``** (default 1): while it decodes, the scheduler
  polls for new requests every R steps, so a later prompt waits R / 2 steps for the poll and
  is prefilled together with the other prompts that arrived since the last one.
- **TensorRT-LLM's batch waiting** (``batch_wait_timeout_iters`` T and
  ``batch_wait_max_tokens_ratio``, off by default): without attention DP, while requests
  decode, prompts are held until their tokens fill that share of ``max_num_tokens`` or for
  T steps, then prefilled together.

A fixed request-path cost per engine (HTTP, tokenisation, detokenisation of the first
token) is added on top; it and the fixture benchmark's N / C are fitted (fitting.fit).
"""

from __future__ import annotations

import math

import numpy as np

from planner.specs.engines import Engine


def first_token_steps(B_max: int, isl: int, budget: int, chunked: bool) -> np.ndarray:
    """m_j for j = 0..B_max-1: the step at whose end prompt j has its first token."""
    j = np.arange(B_max, dtype=float)
    if chunked:
        return np.ceil((j + 1) * isl / budget)
    per_step = max(budget // isl, 1)
    return np.floor(j / per_step) + 1


def first_wave_ms(B: np.ndarray, isl: int, budget: int, chunked: bool,
                  step_fixed_ms: float | np.ndarray, t_tok_ms: np.ndarray) -> np.ndarray:  # fmt: skip
    """Mean time to first token of B prompts that arrive together (vectorised over B)."""
    b = np.maximum(np.asarray(B, dtype=float), 1.0)
    m = first_token_steps(int(b.max()), isl, budget, chunked)
    csum = np.cumsum(m)
    bi = b.astype(int)
    sum_m = csum[bi - 1]
    # Tokens done by the end of step m_j: m_j full budgets, except in the wave's last step.
    last = m[bi - 1]
    first_last = np.searchsorted(m, last)  # first prompt finishing in the last step
    full = np.where(first_last > 0, csum[np.maximum(first_last - 1, 0)], 0.0)
    per_step_tokens = budget if chunked else max(budget // isl, 1) * isl
    tokens = full * per_step_tokens + (bi - first_last) * b * isl
    return (sum_m * step_fixed_ms + tokens * t_tok_ms) / b


def prefill_share(B: np.ndarray, prompt_ms: np.ndarray, osl: int,
                  tpot_ms: np.ndarray) -> np.ndarray:  # fmt: skip
    """Share of the time a rank spends prefilling: B prompts of ``prompt_ms`` each per
    request lifetime of ``osl`` steps (capped at 0.9, where the M/D/1 queue still holds)."""
    return np.minimum(B * prompt_ms / np.maximum(osl * tpot_ms, 1e-9), 0.9)


def adp_balance_wait_steps(B: np.ndarray, dp: int, osl: int, timeout_iters: int) -> np.ndarray:
    """Mean decode steps a later prompt waits under TensorRT-LLM's attention-DP balance.

    NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor.py
    ``_balance_adp_requests``: while every rank decodes, context requests are held until
    every rank has one (then all start) or until a counter, which counts every step without
    that, reaches ``timeout_iters``; a rank with nothing to decode releases them at once.
    A rank's requests finish (and are replaced there) at B / O per step, so the time until
    all ``dp`` ranks hold a prompt is the largest of dp exponentials; a cycle lasts
    L = min(timeout, that), and a prompt arriving at a random step waits E[L^2] / (2 E[L]).
    """
    b = np.asarray(B, dtype=float)
    if timeout_iters <= 0 or dp <= 1:
        return np.zeros_like(b)
    t = np.linspace(0.0, float(timeout_iters), 241)
    rate = b[:, None] / max(osl, 1)
    survive = 1.0 - (1.0 - np.exp(-rate * t)) ** dp  # P(not every rank holds a prompt by t)
    mean_l = np.trapezoid(survive, t, axis=1)
    mean_l2 = np.trapezoid(2.0 * t * survive, t, axis=1)
    # One running request per rank: its replacement finds the rank idle, released at once.
    return np.where(b >= 2, mean_l2 / (2.0 * np.maximum(mean_l, 1e-9)), 0.0)


def recv_wait_steps(interval: int) -> float:
    """Mean decode steps a later prompt waits for SGLang's scheduler to poll for it.

    sgl-project/sglang python/sglang/srt/managers/scheduler_recv_skipper.py
    ``SchedulerRecvSkipper``: each loop adds its last batch's weight to a counter (a decode
    step 1, a prefill batch 1000) and requests are received only when it reaches
    ``--scheduler-recv-interval``, then it resets. While the engine decodes, polls come every
    R steps and a prompt arriving at a random step waits R / 2 of them; right after a prefill
    it polls at once, so the first wave (an idle engine) does not wait.
    """
    return interval / 2.0 if interval > 1 else 0.0


def recv_pooled_prompts(B: np.ndarray, osl: int, interval: int) -> np.ndarray:
    """Other prompts one poll of SGLang's scheduler hands over with a later prompt: the rank's
    replacements over the R steps since the last poll (B / O per step), prefilled together."""
    b = np.asarray(B, dtype=float)
    return b * interval / max(osl, 1) if interval > 1 else np.zeros_like(b)


def _poisson_pmf(n: int, mu: np.ndarray) -> np.ndarray:
    """P(N = j) for j = 0..n, N ~ Poisson(mu) (last axis j)."""
    j = np.arange(n + 1, dtype=float)
    logfact = np.array([math.lgamma(x + 1.0) for x in j])
    m = np.maximum(np.asarray(mu, dtype=float), 1e-300)[..., None]
    return np.exp(j * np.log(m) - m - logfact)


def batch_wait(B: np.ndarray, isl: int, osl: int, budget: int, timeout_iters: int,
               tokens_ratio: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(mean decode steps a later prompt is held, other prompts released with it) under
    TensorRT-LLM's batch waiting.

    NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor.py ``_waiting_requests``,
    called from ``_schedule`` only without attention DP and while generation requests run:
    the scheduled context requests are held, a counter counting each held step, until it
    reaches ``batch_wait_timeout_iters`` T or the step's tokens (the prompts' plus one per
    decoding request) reach ``batch_wait_max_tokens_ratio`` x ``max_num_tokens``; then all go
    at once and the counter resets (with either setting at 0 nothing is held). Prompts arrive
    at B / O per step, so a hold opened by one prompt ends at L = min(T, S_k), S_k the k-th
    later arrival, k + 1 prompts filling the share: E[L] = int_0^T P(N(t) < k) dt; its prompts
    wait E[L] + int_0^T E[N(t); N(t) < k] dt in all and number 1 + M, M = min(N(T), k); a
    prompt shares its release with E[M(M + 1)] / E[M + 1] others (size-biased).
    """
    b = np.asarray(B, dtype=float)
    waits, pooled = np.zeros_like(b), np.zeros_like(b)
    if timeout_iters <= 0 or tokens_ratio <= 0:
        return waits, pooled
    T = float(timeout_iters)
    need = np.ceil((tokens_ratio * budget - b) / max(isl, 1))  # prompts that fill the share
    t = np.linspace(0.0, T, 241)
    for i, (bi, ni) in enumerate(zip(b, need, strict=True)):
        mu = bi / max(osl, 1) * T  # arrivals over a whole hold
        cap = int(mu + 12.0 * math.sqrt(mu + 1.0) + 20.0)  # P(N(T) > cap) is negligible
        k = int(ni) - 1 if ni * isl + bi <= budget else cap  # else only T releases them
        k = min(k, cap)
        if k <= 0:
            continue
        pmf_t = _poisson_pmf(k - 1, mu * t / T)  # N(t) = 0..k-1
        j = np.arange(k, dtype=float)
        mean_l = np.trapezoid(pmf_t.sum(axis=-1), t)
        held = mean_l + np.trapezoid((pmf_t * j).sum(axis=-1), t)
        pmf = _poisson_pmf(k - 1, mu)
        tail = max(1.0 - pmf.sum(), 0.0)  # P(N(T) >= k): M = k
        m1 = float((pmf * j).sum() + tail * k)
        m2 = float((pmf * j * j).sum() + tail * k * k)
        waits[i] = held / (1.0 + m1)
        pooled[i] = (m1 + m2) / (1.0 + m1)
    return waits, pooled


def pooled_prefill_ms(n: np.ndarray, isl: int, budget: int, chunked: bool,
                      step_fixed_ms: float | np.ndarray,
                      t_tok_ms: np.ndarray) -> np.ndarray:  # fmt: skip
    """Mean time to first token of a prompt prefilled together with n - 1 others (n >= 1,
    fractional n interpolated between its whole neighbours)."""
    lo = np.floor(np.maximum(n, 1.0))
    a = first_wave_ms(lo, isl, budget, chunked, step_fixed_ms, t_tok_ms)
    b = first_wave_ms(lo + 1.0, isl, budget, chunked, step_fixed_ms, t_tok_ms)
    return a + (np.maximum(n, 1.0) - lo) * (b - a)


def later_wave_ms(eng: Engine, B: np.ndarray, isl: int, osl: int, budget: int,
                  tpot_ms: np.ndarray, step_fixed_ms: float, t_tok_ms: np.ndarray,
                  wait_steps: np.ndarray | float = 0.0,
                  pooled: np.ndarray | float = 0.0) -> np.ndarray:  # fmt: skip
    """Mean time to first token of a prompt that arrives while B requests decode
    (``t_tok_ms``: its own prompt token's time, planner.cost.step.PrefillCost;
    ``wait_steps``: decode steps the scheduler holds it, at least the half step to the next
    step boundary; ``pooled``: other prompts released with it, prefilled in arrival order in
    a batch of their own or, on TensorRT-LLM, riding on decode steps that cost ``tpot_ms``)."""
    own_tokens_ms = isl * t_tok_ms
    n = 1.0 + np.broadcast_to(pooled, np.shape(B))
    if eng.mixed and eng.chunked:
        steps = np.ceil(isl / np.maximum(budget - B, 1.0))
        own = steps * tpot_ms + own_tokens_ms  # its chunks ride on decode steps
    elif eng.mixed:  # whole prompts ride on decode steps, those released together FCFS
        own = pooled_prefill_ms(n, isl, budget, False, tpot_ms, t_tok_ms)
    else:  # a prefill batch of its own (SGLang without --enable-mixed-chunk)
        own = pooled_prefill_ms(n, isl, budget, eng.chunked, step_fixed_ms, t_tok_ms)
    rho = prefill_share(B, own_tokens_ms, osl, tpot_ms)
    queue = rho / (2 * (1 - rho)) * own_tokens_ms
    return np.maximum(wait_steps, 0.5) * tpot_ms + own + queue


def ttft_ms(eng: Engine, B: np.ndarray, want: np.ndarray, isl: int, osl: int, budget: int,
            tpot_ms: np.ndarray, step_fixed_ms: float, t_tok_ms: np.ndarray,
            t_own_ms: np.ndarray, fixed_ms: float, prompts_per_client: np.ndarray,
            wait_steps: np.ndarray | float = 0.0,
            pooled: np.ndarray | float = 0.0) -> np.ndarray:  # fmt: skip
    """Mean TTFT at each concurrency (per attention rank: B admitted of ``want`` clients).
    ``t_tok_ms``: a prompt token's time when every busy rank prefills (the first wave);
    ``t_own_ms``: a later prompt's, among mostly decoding ranks; ``wait_steps``: steps the
    scheduler holds a later prompt (adp_balance_wait_steps, recv_wait_steps, batch_wait);
    ``pooled``: other prompts prefilled with it (recv_pooled_prompts, batch_wait)."""
    k = np.maximum(prompts_per_client, 1.0)
    first = first_wave_ms(B, isl, budget, eng.chunked, step_fixed_ms, t_tok_ms)
    later = later_wave_ms(eng, B, isl, osl, budget, tpot_ms, step_fixed_ms, t_own_ms,
                          wait_steps, pooled)  # fmt: skip
    admission = np.maximum(want / B - 1.0, 0.0) * osl * tpot_ms
    return fixed_ms + (first + (k - 1) * later) / k + admission
