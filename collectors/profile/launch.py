"""Start one process per TP rank (torch.multiprocessing, spawn), wait, and judge the outcome.

A rank that dies or hangs ends the whole run: the others are killed at the deadline and
the caller gets a MeasurementError naming the rank, so nothing is committed. Two deadlines:
start-up (process start, CUDA/NCCL/CUPTI init, weights) until every rank has written
``rank{r}.ready``, then ``--timeout`` for the profiled steps, so a slow first CUDA start does
not eat the steps' budget and a hung step is still caught quickly.
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path

from collectors.core.errors import MeasurementError
from collectors.profile.worker import WorkerSpec, spawned, trace_name

POLL_S = 0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(out: Path, rank: int) -> str | None:
    """'ok', the first line of the rank's error, or None while it has said nothing."""
    if (out / f"rank{rank}.ok").exists():
        return "ok"
    err = out / f"rank{rank}.err"
    if err.exists():
        return err.read_text().splitlines()[0] if err.read_text() else "failed"
    return None


def launch(base: WorkerSpec) -> list[Path]:
    """Run ``base.world_size`` ranks; return their trace files (rank order) or raise."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = Path(base.out_dir)
    init = f"tcp://127.0.0.1:{free_port()}"
    procs = []
    for rank in range(base.world_size):
        spec = replace(base, rank=rank, init_method=init)
        proc = ctx.Process(target=spawned, args=(spec,), name=f"stepscope-profile-rank{rank}")
        proc.start()
        procs.append(proc)
    deadline = time.monotonic() + base.startup_timeout_s
    started = False
    try:
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            failed = [r for r, p in enumerate(procs) if not p.is_alive() and p.exitcode != 0]
            if failed:
                # Give the survivors a moment to notice the broken group and report.
                _wait_all(procs, min(deadline, time.monotonic() + 5))
                break
            if not started and all(_ready(out, r) for r in range(len(procs))):
                started = True
                deadline = time.monotonic() + base.timeout_s
            time.sleep(POLL_S)
    finally:
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for r in hung:
            procs[r].kill()
        for p in procs:
            p.join(5)
    died, hung_msgs, failed = [], [], []
    for rank, proc in enumerate(procs):
        status = _status(out, rank)
        if status == "ok" and proc.exitcode == 0:
            continue
        if rank in hung and not started:
            hung_msgs.append(f"rank {rank} did not start within --startup-timeout "
                             f"{base.startup_timeout_s:g} s (hung; killed)")  # fmt: skip
        elif rank in hung:
            hung_msgs.append(
                f"rank {rank} did not finish within {base.timeout_s:g} s (hung; killed)"
            )
        elif status and status != "ok":
            failed.append(f"rank {rank} failed: {status[:200]}")
        else:
            died.append(f"rank {rank} died with exit code {proc.exitcode}")
    # The root cause first: a rank that died takes its peers' collectives down with it.
    problems = died + hung_msgs + failed
    if problems:
        raise MeasurementError("; ".join(problems) + "; nothing was committed")
    traces = [out / trace_name(r) for r in range(base.world_size)]
    missing = [t.name for t in traces if not t.is_file()]
    if missing:
        raise MeasurementError(f"ranks finished but wrote no trace ({', '.join(missing)})")
    return traces


def _ready(out: Path, rank: int) -> bool:
    return (out / f"rank{rank}.ready").exists() or (out / f"rank{rank}.ok").exists()


def _wait_all(procs: list, until: float) -> None:
    while any(p.is_alive() for p in procs) and time.monotonic() < until:
        time.sleep(POLL_S)
