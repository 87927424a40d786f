"""What a stored run's server command line says about its engine's scheduler.

The Serving page predicts a measured run as it was launched: its token budget (vLLM
``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TensorRT-LLM's
``trtllm-serve --max_num_tokens``) and SGLang's ``--scheduler-recv-interval``, read from the
``--server-args`` the bench collector recorded with the run, or from what an SGLang server
reported about itself (``/get_server_info``, recorded by its bench_serving and by the sweep:
``server_info.<field>`` in the result's ``extra``; collectors/sglang/result_keys.py). The
server's values win: they are what ran, after ``ServerArgs.__post_init__`` resolved defaults
and, under DP attention, divided ``chunked_prefill_size`` by ``dp_size``
(python/sglang/srt/server_args.py ``_handle_data_parallelism``). Text only
(planner.specs.launch_parse): nothing is run. TensorRT-LLM's batch waiting lives in its
``--extra_llm_api_options`` YAML, which a command line does not carry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from planner.specs.launch_parse import parse_text

# Flags as planner.specs.launch_parse normalises them (long form, dashes for underscores).
BUDGET_FLAGS = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size",
                "trtllm": "--max-num-tokens"}  # fmt: skip
RECV_FLAG = "--scheduler-recv-interval"
REPORTED = "server_info."  # the prefix of the server-reported facts in a result's extra


@dataclass(frozen=True)
class SchedulerSettings:
    token_budget: int = 0  # 0 = the engine's default
    recv_interval: int = 1  # SGLang's default
    flags: tuple[str, ...] = ()  # the flags read, as launched (for the page's caption)


def _positive(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n > 0 else None


def reported_by_server(extra: object) -> dict[str, object]:
    """The ``server_info.<field>`` facts of a serving_bench row's ``extra`` JSON, by field."""
    try:
        obj = json.loads(extra) if isinstance(extra, str) and extra else {}
    except ValueError:
        return {}
    if not isinstance(obj, dict):
        return {}
    return {k[len(REPORTED):]: v for k, v in obj.items() if k.startswith(REPORTED)}


def _reported(engine: str, facts: Mapping[str, object]) -> tuple[int | None, int | None, list[str]]:
    """(global token budget, recv interval, what was read) from SGLang's reported fields."""
    if engine != "sglang" or not facts:
        return None, None, []
    used = []
    budget = _positive(facts.get("chunked_prefill_size"))
    if budget:
        ranks = _positive(facts.get("dp_size")) or 1
        if facts.get("enable_dp_attention") is True and ranks > 1:
            used.append(f"chunked_prefill_size={budget} per DP rank x {ranks}")
            budget *= ranks
        else:
            used.append(f"chunked_prefill_size={budget}")
    recv = _positive(facts.get("scheduler_recv_interval"))
    if recv:
        used.append(f"scheduler_recv_interval={recv}")
    return budget, recv, [f"{u} (/get_server_info)" for u in used]


def scheduler_settings(engine: str, server_args: str | None,
                       reported: Mapping[str, object] | None = None) -> SchedulerSettings:  # fmt: skip
    """The settings ``engine`` ran with: what the server ``reported`` (reported_by_server),
    else what ``server_args`` launched it with, else the engine's defaults (also for a value
    that is not a positive number: SGLang's ``--chunked-prefill-size -1`` turns chunking
    off, which the model does not represent)."""
    srv_budget, srv_recv, srv_used = _reported(engine, reported or {})
    commands = parse_text(server_args).commands if server_args else []
    cmd = commands[-1] if commands else None
    budget_arg = cmd.get(BUDGET_FLAGS.get(engine, "")) if cmd else None
    recv_arg = cmd.get(RECV_FLAG) if cmd and engine == "sglang" else None
    budget = _positive(budget_arg.value) if budget_arg and not srv_budget else None
    recv = _positive(recv_arg.value) if recv_arg and not srv_recv else None
    used = [a.text for a, v in ((budget_arg, budget), (recv_arg, recv)) if a and v]
    return SchedulerSettings(srv_budget or budget or 0, srv_recv or recv or 1,
                             tuple(srv_used + used))  # fmt: skip


def row_settings(engine: str, server_args: str | None, extra: object) -> SchedulerSettings:
    """scheduler_settings of one stored result: its run's ``server_args`` and the facts its
    ``extra`` JSON text holds (a run's results share them, so each pair is parsed once)."""
    return _settings(engine, server_args, tuple(sorted(reported_by_server(extra).items())))


@lru_cache(maxsize=256)
def _settings(engine: str, server_args: str | None, facts: tuple) -> SchedulerSettings:
    return scheduler_settings(engine, server_args, dict(facts))
