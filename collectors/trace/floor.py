"""``floor``: a stored trace run's decode steps against their physical floors (docs/floors.md).

    python -m collectors floor RUN_ID [--model PRESET|config.json] [--host PRESET|FILE|HOST|GPU]
                                      [--batch N] [--context TOKENS] [--json]

Per step category: measured us per step, the floor (bytes over the spec memory bandwidth or
FLOPs over the spec tensor peak, a collective's calls x its latency on the host's comm curve,
a launch floor per kernel), measured / floor and at most how much there is to win, each floor
with its assumption. Inputs the run did not record and no flag gives are named under
``missing``. Reads the store; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from collectors.core.errors import EXIT_OK, InputError

if TYPE_CHECKING:
    from collectors.core.context import Context


def add_floor_inputs(parser: argparse.ArgumentParser) -> None:
    """``--model`` / ``--batch`` / ``--context`` (``--host`` is the common flag)."""
    parser.add_argument("--model", metavar="PRESET|CONFIG",
                        help="the served model: a planner preset or its config.json (default: "
                        "the model the run recorded)")  # fmt: skip
    parser.add_argument("--batch", type=int, metavar="N",
                        help="decode sequences per step, where the steps do not say (SGLang "
                        "`step[DECODE bs=N]` and vLLM's annotation do)")  # fmt: skip
    parser.add_argument("--context", type=float, metavar="TOKENS",
                        help="mean KV tokens per decode sequence, where the steps do not say "
                        "(vLLM's detailed annotation `sq32sk55086` does)")  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="a trace, profile, vllm-profile or "
                        "sglang-profile run in the store")  # fmt: skip
    add_floor_inputs(parser)
    parser.epilog = ("--host: a host preset, a host file, a stored host (its newest `gpu` run) "
                     "or a GPU of the known-GPU table (MI300X); default: the GPU the trace "
                     "names, else the run's host's `gpu` run")  # fmt: skip


def run(args: argparse.Namespace, ctx: Context) -> int:
    from planner.api import PlannerInputError, stored_floors

    try:
        report = stored_floors(args.run_id, args.store, args.model, args.host_name, args.batch,
                               args.context)  # fmt: skip
    except PlannerInputError as exc:
        raise InputError(str(exc)) from None
    if args.json:
        ctx.emit(report.to_json())
    else:
        from collectors.core.log import printable  # names in the store are data

        sys.stdout.write("\n".join(printable(line) for line in report.text_lines()) + "\n")
        sys.stdout.flush()
    for line in report.missing:
        ctx.log.warning(f"missing {line}")
    for line in report.input_errors():
        ctx.log.warning(f"input error: {line}")
    return EXIT_OK
