"""What physics rules out of a measured serving point (issue 57): a TPOT below one decode
step's floor, or a TTFT below its prompt's prefill floor, is a slipped unit, not a fast host.

The floors are the Kernel page's (planner.cost.floors: the serving model's own ops at the spec
sheet's bandwidth and tensor peak, no fitted efficiency), at the least the point allows, so a
real measurement is never refused:

- TPOT: every output token waits for at least one decode step holding its sequence; the
  least such step holds that one sequence at its prompt's context (weights it touches, its KV
  cache). With speculative decoding a step may emit several tokens: stored runs that record
  an acceptance length are divided by it.
- TTFT: the first token waits for its prompt's prefill, at least one pass over the prompt's
  tokens (weights read once, their FLOPs, the causal attention).

Collectives and launches are left out: what is left is still a lower bound.
"""

from __future__ import annotations

import numpy as np

from planner.cost.floors import op_floor
from planner.cost.step_ops import Attend, StepShape, decode_ops
from planner.cost.types import ServeLayout, Workload
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

MAX_PLAUSIBLE_MS = 60_000.0  # a converted value past a minute per token is no better guess


def _floor_ms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
              shape: StepShape) -> float:  # fmt: skip
    return sum(op_floor(op, hw, w.activations)[0] for op in decode_ops(m, hw, lay, w, shape)) / 1e3


def tpot_floor_ms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload) -> float:
    """One decode step of one sequence at the prompt's context, on the busiest GPU."""
    one = np.array([1.0])
    return _floor_ms(m, hw, lay, w, StepShape.decode(one, float(w.isl), one))


def ttft_floor_ms(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload) -> float:
    """One pass over the prompt's tokens (its prefill), on the busiest GPU."""
    n = np.array([float(w.isl)])
    prompt = Attend(np.array([1.0]), float(w.isl), n, (w.isl + 1) / 2.0, prefill=True)
    return _floor_ms(m, hw, lay, w, StepShape(n, np.array([1.0]), (prompt,), n))


def slip(value_ms: float, floor_ms: float, per_token: bool = True) -> str:
    """The likely unit slip of a value below its floor, in words: seconds for ms, or (a time
    per token) a rate in tokens/s."""
    guesses = [(value_ms * 1e3, f"seconds, not ms? ({value_ms:g} s = {value_ms * 1e3:g} ms)")]
    if value_ms > 0 and per_token:
        guesses.append((1e3 / value_ms, f"tokens/s, not ms? ({value_ms:g} tokens/s = "
                                        f"{1e3 / value_ms:.4g} ms a token)"))  # fmt: skip
    fits = [words for ms, words in guesses if floor_ms <= ms <= MAX_PLAUSIBLE_MS]
    return " or ".join(fits) if fits else "check its unit (ms)"


def refusal(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, tpot_ms: float,
            ttft_ms: float | None, tokens_per_step: float = 1.0) -> str:  # fmt: skip
    """Why physics rules the point out ("" when it does not): one sentence naming the floor
    and the likely slip."""
    where = f"{m.name}, {lay.describe()} on {hw.gpu_count}x {hw.gpu_model}"
    floor = tpot_floor_ms(m, hw, lay, w) / max(tokens_per_step, 1.0)
    if tpot_ms < floor:
        step = "one decode step" + (f" over {tokens_per_step:g} tokens" if tokens_per_step > 1
                                    else "")  # fmt: skip
        return (f"tpot_ms {tpot_ms:g} is below the physical floor of {step}, {floor:.3g} ms "
                f"({where}: one sequence at {w.isl} tokens of context, spec-sheet bandwidth "
                f"and peak); {slip(tpot_ms, floor)}")  # fmt: skip
    if ttft_ms is not None:
        pre = ttft_floor_ms(m, hw, lay, w)
        if ttft_ms < pre:
            return (f"ttft_ms {ttft_ms:g} is below the physical floor of its prompt's prefill, "
                    f"{pre:.3g} ms ({where}: {w.isl} prompt tokens, spec-sheet bandwidth and "
                    f"peak); {slip(ttft_ms, pre, per_token=False)}")  # fmt: skip
    return ""
