"""Reading a stored run's server command line into its scheduler settings (planner.launch_flags)."""

from __future__ import annotations

import pytest

from planner.launch_flags import SchedulerSettings, scheduler_settings


@pytest.mark.parametrize(
    ("engine", "args", "budget", "recv"),
    [
        ("vllm", "vllm serve m -tp 8 --max-num-batched-tokens 2048", 2048, 1),
        ("vllm", "-tp 8 --max-num-batched-tokens=4096", 4096, 1),
        ("sglang", "python -m sglang.launch_server --model-path m --tp 8 "
         "--chunked-prefill-size 4096 --scheduler-recv-interval 30", 4096, 30),
        ("trtllm", "trtllm-serve m --tp_size 8 --max_num_tokens 16384", 16384, 1),
        # SGLang's -1 turns chunking off: not represented, so the default is kept
        ("sglang", "--tp 8 --chunked-prefill-size -1", 0, 1),
        ("vllm", "--tp 8 --max-num-batched-tokens many", 0, 1),
        ("vllm", "--tp 8 --scheduler-recv-interval 30", 0, 1),  # SGLang's flag, not vLLM's
        ("sglang", "--tp 8 --max-num-batched-tokens 2048", 0, 1),  # vLLM's flag
    ],
)
def test_launch_flags_become_the_scheduler_settings(engine: str, args: str, budget: int,
                                                    recv: int) -> None:  # fmt: skip
    got = scheduler_settings(engine, args)
    assert (got.token_budget, got.recv_interval) == (budget, recv)
    assert bool(got.flags) == bool(budget or recv > 1)


def test_no_command_line_is_the_engine_defaults() -> None:
    assert scheduler_settings("vllm", None) == SchedulerSettings()
    assert scheduler_settings("sglang", "") == SchedulerSettings()
    assert scheduler_settings("sglang", "# just a comment") == SchedulerSettings()
