"""TTFT of a closed-loop client against an engine's scheduler: admission, waves, chunks.

The client is ``vllm bench serve --max-concurrency C --num-prompts N`` with fixed random
lengths (I in, O out): all C requests arrive at once, then each finished request is
replaced. Per attention rank (C / DP clients, B of them admitted by the KV cache):

- **First wave**: B prompts at t = 0 are prefilled FCFS in steps of the engine's token
  budget (planner.engines): request j's first token comes at the end of step
  m_j = ceil((j + 1) I / budget) (whole prompts per step when the engine does not chunk);
  a step costs its fixed part (weights, kernels) plus its prompt tokens x t_tok (compute
  and the prompt activations' collectives, planner.serving_comm.prefill_comm).
- **Later waves**: the prompts that got their first token in the same step (a cohort of
  about budget / I) also finish together, every output being O tokens, so their
  replacements arrive together. A cohort meets a running batch: it waits half a step, then
  is prefilled FCFS in what the decode tokens leave of the budget (or in a prefill batch of
  its own on SGLang), and waits for the other prompts in the queue (M/D/1 at the prefill
  utilisation, as lengths and steps drift).
- Mean over the run: (first wave + (N / C - 1) x later) / (N / C), where N / C is the
  client's prompts per concurrency slot.
- **Admission**: past the KV capacity, a request waits for (C / B - 1) requests' lifetimes.

A fixed request-path cost per engine (HTTP, tokenisation, detokenisation of the first
token) is added on top; it and the fixture benchmark's N / C are fitted (planner.fit).
"""

from __future__ import annotations

import numpy as np

from planner.engines import Engine


def together_ms(n: np.ndarray, isl: int, room: np.ndarray | float, chunked: bool,
                step_ms: np.ndarray | float, t_tok_ms: np.ndarray) -> np.ndarray:  # fmt: skip
    """Mean time to first token of n prompts that arrive together (vectorised over n).

    FCFS in steps of ``room`` prompt tokens (whole prompts per step when the engine does not
    chunk): prompt j has its first token at the end of step m_j = ceil((j + 1) I / room);
    a step costs ``step_ms`` plus its prompt tokens x ``t_tok_ms``, and every step before
    the last one is full."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    room = np.broadcast_to(np.asarray(room, dtype=float), n.shape)[:, None]
    j = np.arange(int(np.ceil(n.max())), dtype=float)[None, :]
    if chunked:
        m = np.ceil((j + 1) * isl / room)
        done = np.minimum(m * room, n[:, None] * isl)
    else:
        per = np.maximum(np.floor(room / isl), 1.0)
        m = np.floor(j / per) + 1
        done = np.minimum(m * per, n[:, None]) * isl
    step = np.broadcast_to(np.asarray(step_ms, dtype=float), n.shape)[:, None]
    t_tok = np.broadcast_to(np.asarray(t_tok_ms, dtype=float), n.shape)[:, None]
    weight = np.clip(n[:, None] - j, 0.0, 1.0)  # a fractional n counts its last prompt in part
    return (weight * (m * step + done * t_tok)).sum(axis=1) / n


def cohort_size(B: np.ndarray, isl: int, budget: int, chunked: bool) -> np.ndarray:
    """Prompts that get their first token in the same step of the first wave. With fixed
    output lengths they also finish together, so their replacements arrive together and
    share a prefill step again in every later wave."""
    per_step = budget / isl if chunked else max(budget // isl, 1)
    return np.clip(per_step, 1.0, np.maximum(B, 1.0))


def prefill_share(B: np.ndarray, prompt_ms: np.ndarray, osl: int,
                  tpot_ms: np.ndarray) -> np.ndarray:  # fmt: skip
    """Share of the time a rank spends prefilling: B prompts of ``prompt_ms`` each per
    request lifetime of ``osl`` steps (capped at 0.9, where the M/D/1 queue still holds)."""
    return np.minimum(B * prompt_ms / np.maximum(osl * tpot_ms, 1e-9), 0.9)


def later_wave_ms(eng: Engine, B: np.ndarray, isl: int, osl: int, budget: int,
                  tpot_ms: np.ndarray, step_fixed_ms: float,
                  t_tok_ms: np.ndarray) -> np.ndarray:  # fmt: skip
    """Mean time to first token of a prompt that arrives while B requests decode
    (``t_tok_ms``: its own prompt token's time, planner.serving_step.PrefillCost)."""
    own_tokens_ms = isl * t_tok_ms
    cohort = cohort_size(B, isl, budget, eng.chunked)
    if eng.mixed:  # its chunks ride on decode steps, beside the running batch's tokens
        room = np.maximum(budget - B, 1.0) if eng.chunked else np.full_like(B, float(budget))
        own = together_ms(cohort, isl, room, eng.chunked, tpot_ms, t_tok_ms)
    else:  # a prefill batch of its own (SGLang without --enable-mixed-chunk)
        own = together_ms(cohort, isl, budget, eng.chunked, step_fixed_ms, t_tok_ms)
    rho = prefill_share(B, own_tokens_ms, osl, tpot_ms)
    queue = rho / (2 * (1 - rho)) * own_tokens_ms
    return tpot_ms / 2 + own + queue


def ttft_ms(eng: Engine, B: np.ndarray, want: np.ndarray, isl: int, osl: int, budget: int,
            tpot_ms: np.ndarray, step_fixed_ms: float, t_tok_ms: np.ndarray,
            t_own_ms: np.ndarray, fixed_ms: float,
            prompts_per_client: np.ndarray) -> np.ndarray:  # fmt: skip
    """Mean TTFT at each concurrency (per attention rank: B admitted of ``want`` clients).
    ``t_tok_ms``: a prompt token's time when every busy rank prefills (the first wave);
    ``t_own_ms``: a later prompt's, among mostly decoding ranks."""
    k = np.maximum(prompts_per_client, 1.0)
    first = together_ms(B, isl, budget, eng.chunked, step_fixed_ms, t_tok_ms)
    later = later_wave_ms(eng, B, isl, osl, budget, tpot_ms, step_fixed_ms, t_own_ms)
    admission = np.maximum(want / B - 1.0, 0.0) * osl * tpot_ms
    return fixed_ms + (first + (k - 1) * later) / k + admission
