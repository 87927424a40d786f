"""``trace``: import profiles as one run, per rank and per step.

    python -m collectors trace PATH... [--store S] [--label L] [--host H] [--json]
                                       [--model PRESET|CONFIG] [--batch N] [--context TOKENS]

PATHs are PyTorch-profiler (Kineto) traces (.json, .json.gz, or a crashed run's
unterminated .tmp), Nsight Systems SQLite exports (any name: a SQLite file is read as
one; docs/nsys.md) or ``.nsys-rep`` reports (exported with ``nsys export`` first), or
directories holding them; all of them together are the ranks of one run. Re-importing
the same files is a no-op (the run id is derived from their content). The run belongs to
the host that recorded the profile: ``--host``, else the host the files name, else
``unknown`` (store.UNKNOWN_HOST), never this machine, which is kept as the run's
``imported_on`` (migration 0015); its own inventory is never mixed with the file's GPUs.

``--json`` adds ``floors``: every step category against its physical floor, with the inputs
the trace lacks named under ``missing`` (``python -m collectors floor RUN_ID`` gives them
later; docs/floors.md). ``--model`` is recorded with the run (a preset's name, or the
config.json itself), and so are ``--batch`` / ``--context``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.core.errors import InputError

if TYPE_CHECKING:
    from collectors.core.context import Context


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from collectors.trace.floor import add_floor_inputs

    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH",
        help="trace files (.json, .json.gz, .tmp), nsys exports (.sqlite) or reports "
        "(.nsys-rep), or directories of them; one run",
    )  # fmt: skip
    add_floor_inputs(parser)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from collectors.core.words import first_few
    from collectors.trace.ingest import ingest_traces
    from store.spool.bundle import Bundle, content_run_id

    check_floor_inputs(args)  # a bad --model fails before a long parse
    result = ingest_traces(list(args.paths), log=ctx.log)
    if result.message:
        ctx.log.warning(result.message)
    hosts = result.run_info.get("hosts") or []
    if len(hosts) > 1:
        ctx.log.warning(f"the files name {len(hosts)} hosts ({first_few(hosts)}); the run is "
                        f"filed under {hosts[0]} (pass --host to choose)")  # fmt: skip
    record = ctx.run_record(
        content_run_id("trace", result.digest),
        env=trace_env(ctx.environment(), result.run_info),
        host=ctx.import_host(hosts[0] if hosts else None),
        status="partial" if result.partial else "ok",
        message=result.message,
    )
    record.args.update(
        {k: v for k, v in result.run_info.items() if k in ("world_size", "backend",
                                                             "nccl_version", "devices")}
    )  # fmt: skip
    record.args["paths"] = [str(p) for p in args.paths]
    tables = dict(result.tables)
    summary = result.summary
    if args.model:
        from collectors.serving.model_config import config_file_tables

        tables.update(config_file_tables(args.model) if Path(args.model).exists() else {})
    if args.json:
        summary = {**summary, "floors": floors(args, record.host, result)}
    bundle = Bundle(record, tables)
    del result, tables  # the bundle holds the only reference: submit frees them once spooled
    return ctx.submit(bundle, summary)


def check_floor_inputs(args: argparse.Namespace) -> None:
    """``--model`` / ``--batch`` / ``--context`` checked before a long parse."""
    if args.batch is not None and args.batch < 1:
        raise InputError(f"--batch {args.batch}: give the decode sequences per step, >= 1")
    if args.context is not None and not args.context >= 0:
        raise InputError(f"--context {args.context}: give the mean KV tokens per sequence, >= 0")
    if args.model:
        from planner.api import PlannerInputError, models

        try:
            models.resolve(args.model)
        except PlannerInputError as exc:
            raise InputError(str(exc)) from None


def floors(args: argparse.Namespace, host: str, result) -> dict:
    """The floors of the imported run, from its tables in memory (planner.floor_report)."""
    from planner.api import PlannerInputError, RunFacts, floors_from_rows

    info = result.run_info
    facts = RunFacts(host=host, world_size=int(info.get("world_size") or 0) or
                     len(info.get("ranks") or []) or 1,
                     devices=tuple(info.get("devices") or ()),
                     has_gpu=bool(info.get("has_gpu")))  # fmt: skip
    try:
        report = floors_from_rows(facts, _rows(result.tables["trace_steps"]),
                                  _rows(result.tables["trace_step_categories"]), args.model,
                                  None, args.batch, args.context, args.store)  # fmt: skip
    except PlannerInputError as exc:
        return {"categories": {}, "step": {"measured_us": None, "floor_us": None},
                "missing": [str(exc)]}  # fmt: skip
    return report.to_json()


def _rows(table) -> list[dict]:
    """A trace table's rows as dicts (NULLs as None)."""
    names = [n for part in table.parts[:1] for n in part]
    cols = [table.column(n) for n in names]
    return [dict(zip(names, vals, strict=True)) for vals in zip(*cols, strict=True)]


def trace_env(env: dict, info: dict) -> dict:
    """The runs row describes the traced job and the host that recorded it, not the machine
    that imported it: GPU model, NCCL, OS and CPU come from the files (or stay unknown);
    the importer's own snapshot is kept under ``importer`` (collectors/core/hosts.py)."""
    from collectors.core.hosts import imported_env

    devices = info.get("devices") or []
    return imported_env(
        env, os=info.get("os"), cpu=info.get("cpu"), nccl=info.get("nccl_version"),
        gpu_model=" + ".join(devices) if devices else None,
        gpu_count=len(info.get("ranks") or []) if info.get("has_gpu") else 0,
        trace={k: info.get(k) for k in ("world_size", "backend", "nccl_version", "devices",
                                        "ranks", "files", "hosts", "nsys_version")},
    )  # fmt: skip
