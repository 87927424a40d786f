"""``trace``: import PyTorch-profiler (Kineto) traces as one run, per rank and per step.

    python -m collectors trace PATH... [--store S] [--label L] [--json]

PATHs are trace files (.json, .json.gz, or a crashed run's unterminated .tmp) or
directories holding them; all of them together are the ranks of one run. Re-importing
the same files is a no-op (the run id is derived from their content).
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
        help="trace files (.json, .json.gz, .tmp) or directories of them; one run",
    )  # fmt: skip


def run(args: argparse.Namespace, ctx: Context) -> int:
    from collectors.trace.ingest import ingest_traces
    from store.spool.bundle import Bundle, content_run_id

    result = ingest_traces(list(args.paths), log=ctx.log)
    if result.message:
        ctx.log.warning(result.message)
    record = ctx.run_record(
        content_run_id("trace", result.digest),
        env=trace_env(ctx.environment(), result.run_info),
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
    """The runs row describes the traced job, not the machine that imported it: GPU model
    and NCCL come from the trace; the importer's own snapshot is kept under ``importer``."""
    out = {k: env.get(k) for k in ("hostname", "os", "cpu", "cpu_count", "mem_bytes",
                                   "python", "stepscope_version")}  # fmt: skip
    devices = info.get("devices") or []
    out.update(
        torch=None, vllm=None, cuda=None, cuda_driver=None,
        nccl=info.get("nccl_version"),
        gpu_model=" + ".join(devices) if devices else None,
        gpu_count=len(info.get("ranks") or []) if info.get("has_gpu") else 0,
        trace={k: info.get(k) for k in ("world_size", "backend", "nccl_version", "devices",
                                        "ranks", "files")},
        importer={k: env.get(k) for k in ("torch", "vllm", "nccl", "cuda", "gpu_model",
                                          "gpu_count")},
    )  # fmt: skip
    return out
