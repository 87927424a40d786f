"""One rank of the ``profile`` run: join the group, run the decode step under torch.profiler.

Started by the parent (``collectors/profile/launch.py``) through torch.multiprocessing, or
directly by torchrun (``torchrun --nproc-per-node 2 -m collectors.profile.worker --out DIR``,
then ``python -m collectors trace DIR``). Each rank writes its chrome trace as
``stepscope_profile_rank{r}.pt.trace.json`` and status files the parent reads:
``rank{r}.ready`` (start-up done: group joined, weights built, profiler started, warm-up
steps run), then
``rank{r}.ok`` or ``rank{r}.err`` (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

FAULT_ENV = "STEPSCOPE_PROFILE_FAULT"  # test hook: "hang:RANK", "die:RANK", "slowstart:RANK:S"


@dataclass
class WorkerSpec:
    rank: int
    world_size: int
    init_method: str  # tcp://host:port, or "env://" under torchrun
    out_dir: str
    device: str  # "cpu" | "cuda"
    shape: dict
    batch: int
    context: int
    warmup: int
    steps: int
    timeout_s: float  # the profiled steps, counted from when every rank is ready
    startup_timeout_s: float = 600.0  # process start, CUDA/NCCL init, weights, CUPTI
    local_rank: int | None = None  # torchrun's LOCAL_RANK; None: spawned here, use rank


def trace_name(rank: int) -> str:
    return f"stepscope_profile_rank{rank}.pt.trace.json"


def _slow_start(rank: int) -> None:
    """Test hook: one rank's start-up takes S seconds (a cold CUDA/NCCL/CUPTI start)."""
    kind, _, rest = os.environ.get(FAULT_ENV, "").partition(":")
    who, _, seconds = rest.partition(":")
    if kind == "slowstart" and who.isdigit() and int(who) == rank:
        time.sleep(float(seconds or 0))


def _fault(rank: int, step: int) -> None:
    """Test hook: make one rank hang or die in its first profiled step."""
    kind, _, who = os.environ.get(FAULT_ENV, "").partition(":")
    if step != 0 or not who.isdigit() or int(who) != rank:
        return
    if kind == "hang":
        time.sleep(3600)
    elif kind == "die":
        os._exit(17)


def spawned(spec: WorkerSpec) -> None:
    """Entry of a rank the parent started: its output (Kineto's chatter) goes to a log file."""
    log = os.open(Path(spec.out_dir) / f"rank{spec.rank}.log", os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    run_rank(spec)


def run_rank(spec: WorkerSpec) -> None:
    """Entry point of a rank process; never raises (the parent reads the status file)."""
    out = Path(spec.out_dir)
    try:
        stats = _profile(spec)
        (out / f"rank{spec.rank}.ok").write_text(json.dumps(stats))
    except BaseException as exc:  # report anything, then exit non-zero
        line = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        (out / f"rank{spec.rank}.err").write_text(line + "\n" + traceback.format_exc())
        sys.exit(1)


def _profile(spec: WorkerSpec) -> dict:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    from collectors.profile import workload
    from collectors.profile.model_presets import ModelShape

    cuda = spec.device == "cuda"
    if cuda:
        # torchrun: LOCAL_RANK picks this node's GPU. Spawned ranks are all local and use
        # their spawn index: a LOCAL_RANK left in the launching shell must not pin them all.
        local = spec.local_rank if spec.local_rank is not None else spec.rank
        torch.cuda.set_device(local)
        device = torch.device("cuda", torch.cuda.current_device())
        dtype, backend = torch.bfloat16, "nccl"
    else:
        # Two ranks share the machine's cores: one intra-op thread each avoids oversubscription.
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // spec.world_size))
        device, dtype, backend = torch.device("cpu"), torch.float32, "gloo"
    # The group's timeout covers the first barrier, which waits for the slowest start-up.
    dist.init_process_group(
        backend, init_method=spec.init_method, rank=spec.rank, world_size=spec.world_size,
        timeout=timedelta(seconds=spec.startup_timeout_s + spec.timeout_s),
        device_id=device if cuda else None,
    )  # fmt: skip
    try:
        shape = ModelShape(**spec.shape)
        _slow_start(spec.rank)
        model = workload.build(shape, spec.rank, spec.world_size, spec.batch, spec.context,
                               device, dtype)  # fmt: skip
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        ready = Path(spec.out_dir) / f"rank{spec.rank}.ready"
        gen = torch.Generator().manual_seed(42)  # same tokens on every rank (TP replicates x)
        x = torch.randn(spec.batch, shape.hidden, generator=gen).to(device=device, dtype=dtype)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        path = Path(spec.out_dir) / trace_name(spec.rank)
        sched = schedule(wait=0, warmup=spec.warmup, active=spec.steps, repeat=1)
        with profile(activities=activities, schedule=sched, record_shapes=True,
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:  # fmt: skip
            for i in range(spec.warmup + spec.steps):
                if i == spec.warmup:  # CUPTI, cuBLAS handles and NCCL's first calls are done
                    ready.write_text("ready\n")
                if i >= spec.warmup:
                    _fault(spec.rank, i - spec.warmup)
                pos = spec.context - 1 - i % spec.context
                workload.decode_step(model, x, pos)
                if cuda:
                    torch.cuda.synchronize()
                prof.step()
        dist.barrier()
        return {"rank": spec.rank, "backend": backend, "trace": path.name,
                "torch": torch.__version__}  # fmt: skip
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """torchrun entry: rank and world size from the environment, shape from a preset."""
    from collectors.profile.model_presets import PRESETS, scaled

    p = argparse.ArgumentParser(prog="python -m collectors.profile.worker")
    p.add_argument("--out", required=True)
    p.add_argument("--preset", default="kimi-k2.5", choices=sorted(PRESETS))
    p.add_argument("--scale", type=float, default=1 / 16)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    spec = WorkerSpec(
        rank=int(os.environ.get("RANK", "0")), world_size=world, init_method="env://",
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        out_dir=a.out, device=a.device,
        shape=asdict(scaled(PRESETS[a.preset], a.scale, world, a.layers)), batch=a.batch,
        context=a.context, warmup=1, steps=a.steps, timeout_s=300,
    )  # fmt: skip
    Path(a.out).mkdir(parents=True, exist_ok=True)
    run_rank(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
