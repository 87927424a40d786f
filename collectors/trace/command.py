"""``trace``: import profiles as one run, per rank and per step.

    python -m collectors trace PATH... [--store S] [--label L] [--host H] [--json]

PATHs are PyTorch-profiler (Kineto) traces (.json, .json.gz, or a crashed run's
unterminated .tmp), Nsight Systems SQLite exports (any name: a SQLite file is read as
one; docs/nsys.md) or ``.nsys-rep`` reports (exported with ``nsys export`` first), or
directories holding them; all of them together are the ranks of one run. Re-importing
the same files is a no-op (the run id is derived from their content). The run belongs to
the host that recorded the profile: ``--host``, else the host the files name, else this
machine, whose own inventory is never mixed with the file's GPUs (migration 0012).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collectors.core.context import Context


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH",
        help="trace files (.json, .json.gz, .tmp), nsys exports (.sqlite) or reports "
        "(.nsys-rep), or directories of them; one run",
    )  # fmt: skip


def run(args: argparse.Namespace, ctx: Context) -> int:
    from collectors.trace.ingest import ingest_traces
    from store.spool.bundle import Bundle, content_run_id

    result = ingest_traces(list(args.paths), log=ctx.log)
    if result.message:
        ctx.log.warning(result.message)
    hosts = result.run_info.get("hosts") or []
    if len(hosts) > 1:
        ctx.log.warning(f"the files name {len(hosts)} hosts ({', '.join(hosts)}); the run is "
                        f"filed under {hosts[0]} (pass --host to choose)")  # fmt: skip
    record = ctx.run_record(
        content_run_id("trace", result.digest),
        env=trace_env(ctx.environment(), result.run_info),
        host=args.host_name or (hosts[0] if hosts else None),
        status="partial" if result.partial else "ok",
        message=result.message,
    )
    record.args.update(
        {k: v for k, v in result.run_info.items() if k in ("world_size", "backend",
                                                             "nccl_version", "devices")}
    )  # fmt: skip
    record.args["paths"] = [str(p) for p in args.paths]
    return ctx.submit(Bundle(record, result.tables), result.summary)


def trace_env(env: dict, info: dict) -> dict:
    """The runs row describes the traced job and the host that recorded it, not the machine
    that imported it: GPU model, NCCL, OS and CPU come from the files (or stay unknown);
    the importer's own snapshot is kept under ``importer`` (``hostname`` stays the machine
    the collector ran on, as for every run)."""
    devices = info.get("devices") or []
    return {
        "hostname": env.get("hostname"), "stepscope_version": env.get("stepscope_version"),
        "os": info.get("os"), "cpu": info.get("cpu"), "cpu_count": None, "mem_bytes": None,
        "python": None, "torch": None, "vllm": None, "cuda": None, "cuda_driver": None,
        "nccl": info.get("nccl_version"),
        "gpu_model": " + ".join(devices) if devices else None,
        "gpu_count": len(info.get("ranks") or []) if info.get("has_gpu") else 0,
        "trace": {k: info.get(k) for k in ("world_size", "backend", "nccl_version", "devices",
                                           "ranks", "files", "hosts", "nsys_version")},
        "importer": {k: env.get(k) for k in ("hostname", "os", "cpu", "cpu_count", "mem_bytes",
                                             "python", "torch", "vllm", "nccl", "cuda",
                                             "gpu_model", "gpu_count")},
    }  # fmt: skip
