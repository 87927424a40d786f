"""``profile``: a built-in MoE decode step, TP over local ranks, under torch.profiler.

Each rank runs the step (collectors/profile/workload.py) with a profiler schedule, so the
steps appear as ``ProfilerStep#N``, and exports its chrome trace; the parent then ingests
the traces with the ``trace`` collector's code and commits one run. gloo on CPU, NCCL on
GPUs (one per rank). A rank that dies or hangs fails the run and nothing is committed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import InputError
from collectors.profile.model_presets import DEFAULT_PRESET, PRESETS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("workload")
    g.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=DEFAULT_PRESET,
        help=f"model whose shapes the step uses (default {DEFAULT_PRESET})",
    )
    g.add_argument(
        "--scale",
        type=float,
        default=1 / 16,
        help="width factor in (0, 1] applied to hidden/expert/head sizes "
        "(default 1/16, so a CPU runs it in seconds)",
    )
    g.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    g.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (default 2)")
    g.add_argument("--batch", type=int, default=8, help="tokens decoded per step (default 8)")
    g.add_argument(
        "--context",
        type=int,
        default=256,
        help="KV-cache length each token attends to (default 256)",
    )
    g.add_argument("--steps", type=int, default=3, help="profiled steps (default 3)")
    g.add_argument("--warmup", type=int, default=1, help="unrecorded warm-up steps (default 1)")
    g.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: CUDA (NCCL) when there is one GPU per rank, else CPU (gloo)",
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds the profiled steps may take once every rank has started, before a "
        "hung rank fails the run (default 120)",
    )
    g.add_argument(
        "--startup-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds for start-up: process start, CUDA/NCCL/CUPTI init and building the "
        "weights (default 600)",
    )
    g.add_argument("--keep-traces", metavar="DIR", help="also keep the rank traces in DIR")  # fmt: skip


def _check(args: argparse.Namespace) -> None:
    checks = [
        (0 < args.scale <= 1, f"--scale {args.scale}: must be in (0, 1]"),
        (1 <= args.tp <= 64, f"--tp {args.tp}: must be between 1 and 64"),
        (1 <= args.batch <= 4096, f"--batch {args.batch}: must be between 1 and 4096"),
        (1 <= args.steps <= 100, f"--steps {args.steps}: must be between 1 and 100"),
        (0 <= args.warmup <= 100, f"--warmup {args.warmup}: must be between 0 and 100"),
        (1 <= args.layers <= 128, f"--layers {args.layers}: must be between 1 and 128"),
        (args.warmup + args.steps <= args.context <= 1 << 20,
         f"--context {args.context}: must cover warm-up + steps and be at most 1048576"),
        (args.timeout > 0, f"--timeout {args.timeout}: must be positive"),
        (args.startup_timeout > 0, f"--startup-timeout {args.startup_timeout}: must be positive"),
    ]  # fmt: skip
    for ok, message in checks:
        if not ok:
            raise InputError(message)
    if args.keep_traces and Path(args.keep_traces).exists() and not Path(args.keep_traces).is_dir():
        raise InputError(f"--keep-traces {args.keep_traces}: exists and is not a directory")


def resolve_device(requested: str, tp: int) -> str:
    """'cuda' when asked for (and usable) or when auto finds one GPU per rank, else 'cpu'."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "cuda":
        if gpus < tp:
            raise InputError(f"--device cuda: {tp} ranks need {tp} GPUs, this machine has {gpus}")
        return "cuda"
    return "cuda" if requested == "auto" and gpus >= tp else "cpu"


def run(args: argparse.Namespace, ctx: Context) -> int:
    _check(args)
    if os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("LOCAL_WORLD_SIZE"):
        raise InputError(
            "profile: runs under torchrun need the worker module: `torchrun --nproc-per-node N "
            "-m collectors.profile.worker --out DIR`, then `python -m collectors trace DIR` "
            "(plain `python -m collectors profile --tp N` starts its own ranks)"
        )
    from collectors.profile.launch import launch
    from collectors.profile.model_presets import scaled
    from collectors.profile.worker import WorkerSpec
    from store.spool.bundle import Bundle, new_run_id

    device = resolve_device(args.device, args.tp)
    shape = scaled(PRESETS[args.preset], args.scale, args.tp, args.layers)
    backend = "nccl" if device == "cuda" else "gloo"
    ctx.log.info(
        f"profiling {args.preset} x{args.scale:g} ({shape.layers} layers, hidden {shape.hidden}, "
        f"{shape.experts} experts top-{shape.top_k}) on {args.tp} {device} rank(s) via "
        f"{backend}: {args.batch} tokens, {args.warmup} warm-up + {args.steps} profiled steps"
    )
    run_id = new_run_id("profile")
    with tempfile.TemporaryDirectory(prefix="stepscope-profile-") as tmp:
        spec = WorkerSpec(
            rank=0, world_size=args.tp, init_method="", out_dir=tmp, device=device,
            shape=asdict(shape), batch=args.batch, context=args.context, warmup=args.warmup,
            steps=args.steps, timeout_s=args.timeout, startup_timeout_s=args.startup_timeout,
        )  # fmt: skip
        traces = launch(spec)
        if args.keep_traces:
            keep = Path(args.keep_traces) / run_id
            keep.mkdir(parents=True, exist_ok=True)
            for path in traces:
                shutil.copy2(path, keep / path.name)
            ctx.log.info(f"rank traces kept in {keep}")
        from collectors.trace.ingest import ingest_traces  # the trace collector's own parser

        result = ingest_traces(traces, log=ctx.log)
    # Resolved values go into the run's recorded args next to the flags the user gave.
    args.backend, args.device_used, args.model = backend, device, asdict(shape)
    args.tokens_per_step = args.batch
    record = ctx.run_record(
        run_id,
        status="partial" if result.partial else "ok",
        message=result.message,
    )
    summary = {
        **result.summary,
        "preset": args.preset, "scale": args.scale, "tp": args.tp, "backend": backend,
        "device": device, "batch": args.batch,
    }  # fmt: skip
    return ctx.submit(Bundle(record, dict(result.tables)), summary)
