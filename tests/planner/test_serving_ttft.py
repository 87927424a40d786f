"""planner.serving_ttft: prompts that arrive together, and the cohorts of later waves."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engines import ENGINES
from planner.serving_ttft import cohort_size, later_wave_ms, together_ms

STEP_MS, T_TOK_MS = 10.0, 0.01


def test_prompts_in_one_step_share_its_end() -> None:
    # Eight 1,024-token prompts fill one 8,192-token step: each has its first token when
    # the step ends, the step carrying all eight prompts' tokens.
    eight = together_ms(np.array([8.0]), 1024, 8192, True, STEP_MS, np.array([T_TOK_MS]))
    assert eight[0] == pytest.approx(STEP_MS + 8192 * T_TOK_MS)
    # A ninth spills into a second step; the first eight do not wait for it.
    nine = together_ms(np.array([9.0]), 1024, 8192, True, STEP_MS, np.array([T_TOK_MS]))
    assert nine[0] == pytest.approx((8 * eight[0] + 2 * STEP_MS + 9 * 1024 * T_TOK_MS) / 9)
    # Without chunking whole prompts go per step: a 15,000-token prompt is a step of its own.
    two = together_ms(np.array([2.0]), 15000, 15000, False, STEP_MS, np.array([T_TOK_MS]))
    assert two[0] == pytest.approx(1.5 * STEP_MS + 1.5 * 15000 * T_TOK_MS)


def test_a_fractional_group_counts_its_last_prompt_in_part() -> None:
    n = np.array([2.0, 2.5, 3.0])
    t = together_ms(n, 3000, 8192, True, STEP_MS, np.full(3, T_TOK_MS))
    assert t[0] < t[1] < t[2]


def test_prompts_that_started_together_come_back_together() -> None:
    """Every output is O tokens, so the prompts of one first-wave step finish in the same
    step and their replacements share a prefill step: a later 1,024-token prompt at 64
    clients waits for its cohort's 8 x 1,024 tokens on vLLM's 8,192-token budget, not for
    its own 1,024 alone."""
    B, tpot = np.array([64.0]), np.array([20.0])
    assert cohort_size(B, 1024, 8192, True)[0] == 8
    assert cohort_size(B, 8192, 8192, True)[0] == 1
    assert cohort_size(np.array([4.0]), 1024, 8192, True)[0] == 4  # never more than run
    later = later_wave_ms(ENGINES["vllm"], B, 1024, 1024, 8192, tpot, STEP_MS,
                          np.array([T_TOK_MS]))  # fmt: skip
    assert later[0] > tpot[0] / 2 + tpot[0] + 8 * 1024 * T_TOK_MS
