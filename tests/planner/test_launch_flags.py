"""Reading a stored run's server command line into its scheduler settings (planner.specs.launch_flags)."""

from __future__ import annotations

import json

import pytest

from planner.specs.launch_flags import (
    SchedulerSettings,
    reported_by_server,
    row_settings,
    scheduler_settings,
)


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


def _extra(**facts) -> str:
    """A serving_bench extra as the SGLang import writes it (collectors/sglang/result_keys.py)."""
    return json.dumps({"mean_concurrency": 15.6, **{f"server_info.{k}": v for k, v in facts.items()}})


def test_what_the_server_reported_wins_over_the_command_line() -> None:
    """/get_server_info holds the values after ServerArgs.__post_init__: under DP attention
    chunked_prefill_size per rank (server_args.py divides the flag by dp_size), so the global
    budget is that x dp_size."""
    args = "--tp 8 --dp 8 --enable-dp-attention --chunked-prefill-size 4096 --scheduler-recv-interval 10"
    got = row_settings("sglang", args, _extra(chunked_prefill_size=1024, dp_size=8,
                                             enable_dp_attention=True, scheduler_recv_interval=30))
    assert (got.token_budget, got.recv_interval) == (8192, 30)
    assert got.flags == ("chunked_prefill_size=1024 per DP rank x 8 (/get_server_info)",
                         "scheduler_recv_interval=30 (/get_server_info)")
    # without DP attention the value is the global budget; the flag fills what is not reported
    got = row_settings("sglang", args, _extra(chunked_prefill_size=2048, dp_size=8))
    assert (got.token_budget, got.recv_interval) == (2048, 10)
    assert got.flags == ("chunked_prefill_size=2048 (/get_server_info)", "--scheduler-recv-interval 10")


@pytest.mark.parametrize("extra", [None, float("nan"), "", "not json", "[1, 2]",
                                   _extra(chunked_prefill_size=-1, scheduler_recv_interval="x")])
def test_nothing_usable_reported_leaves_the_flags(extra) -> None:
    got = row_settings("sglang", "--tp 8 --chunked-prefill-size 4096", extra)
    assert (got.token_budget, got.flags) == (4096, ("--chunked-prefill-size 4096",))


def test_only_sglang_reads_server_info() -> None:
    facts = reported_by_server(_extra(chunked_prefill_size=1024))
    assert facts == {"chunked_prefill_size": 1024}
    assert scheduler_settings("vllm", None, facts) == SchedulerSettings()
