"""What a stored run's server command line says about its engine's scheduler.

The Serving page predicts a measured run as it was launched: its token budget (vLLM
``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TensorRT-LLM's
``trtllm-serve --max_num_tokens``) and SGLang's ``--scheduler-recv-interval``, read from the
``--server-args`` the bench collector recorded with the run. Text only (planner.lint_parse):
nothing is run. TensorRT-LLM's batch waiting lives in its ``--extra_llm_api_options`` YAML,
which a command line does not carry.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.lint_parse import parse_text

# Flags as planner.lint_parse normalises them (long form, dashes for underscores).
BUDGET_FLAGS = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size",
                "trtllm": "--max-num-tokens"}  # fmt: skip
RECV_FLAG = "--scheduler-recv-interval"


@dataclass(frozen=True)
class SchedulerSettings:
    token_budget: int = 0  # 0 = the engine's default
    recv_interval: int = 1  # SGLang's default
    flags: tuple[str, ...] = ()  # the flags read, as launched (for the page's caption)


def _positive(value: str | None) -> int | None:
    try:
        n = int(value) if value is not None else 0
    except ValueError:
        return None
    return n if n > 0 else None


def scheduler_settings(engine: str, server_args: str | None) -> SchedulerSettings:
    """The settings ``server_args`` launched ``engine`` with; the engine's defaults for what
    it does not set (or sets to something that is not a positive number: SGLang's
    ``--chunked-prefill-size -1`` turns chunking off, which the model does not represent)."""
    if not server_args:
        return SchedulerSettings()
    commands = parse_text(server_args).commands
    if not commands:
        return SchedulerSettings()
    cmd = commands[-1]
    budget_arg = cmd.get(BUDGET_FLAGS.get(engine, ""))
    recv_arg = cmd.get(RECV_FLAG) if engine == "sglang" else None
    budget = _positive(budget_arg.value) if budget_arg else None
    recv = _positive(recv_arg.value) if recv_arg else None
    used = tuple(a.text for a, v in ((budget_arg, budget), (recv_arg, recv)) if a and v)
    return SchedulerSettings(budget or 0, recv or 1, used)
