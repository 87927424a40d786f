"""Start the ranks (spawned here, or this process under torchrun) and watch them.

A rank that hangs or dies must end the run with a clear error after ``--timeout`` and
commit nothing: the parent polls its children, kills them all on the first failure or at
the deadline, and reports each rank's last known stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.comm.worker import Config
from collectors.core.errors import EXIT_FAILED, MeasurementError
from collectors.profile.launch import free_port  # one rank launcher's, shared


@dataclass(frozen=True)
class Torchrun:
    rank: int
    world: int
    local_rank: int


def torchrun_env() -> Torchrun | None:
    """Set when torchrun (or any launcher using its variables) started this process."""
    env = os.environ
    if "RANK" not in env or "WORLD_SIZE" not in env or "MASTER_ADDR" not in env:
        return None
    try:
        return Torchrun(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)))
    except ValueError:
        return None


def _spawn_entry(rank: int, world: int, cfg: Config, init_method: str) -> None:
    """Child entry: one line on stderr instead of a traceback, and a non-zero exit."""
    from collectors.comm.worker import _status, rank_main

    try:
        rank_main(rank, world, cfg, init_method)
    except BaseException as exc:  # noqa: BLE001 - report any failure of this rank, then exit
        first = str(exc).strip().partition("\n")[0]  # a blank message leaves just the type
        line = f"{type(exc).__name__}: {first}"
        with contextlib.suppress(OSError):
            _status(cfg, rank, f"failed: {line}")
        if os.environ.get("STEPSCOPE_DEBUG"):
            raise
        sys.stderr.write(f"comm rank {rank}: {line}\n")
        sys.stderr.flush()
        os._exit(EXIT_FAILED)


def _stage(status_dir: Path, rank: int, unknown: str) -> str:
    """The rank's last stage (what worker._status wrote), or ``unknown`` before any."""
    try:
        return (status_dir / f"rank{rank}.status").read_text().strip()
    except OSError:
        return unknown


def _stages(status_dir: Path, world: int) -> str:
    unknown = "never started (process did not reach Python)"
    return "; ".join(f"rank {r}: {_stage(status_dir, r, unknown)}" for r in range(world))


def run_spawned(cfg_args: dict[str, Any], world: int) -> dict[str, Any]:
    """Spawn ``world`` ranks on this host; return rank 0's merged results."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="stepscope-comm-") as tmp:
        cfg = Config(status_dir=tmp, **cfg_args)
        init_method = f"tcp://127.0.0.1:{free_port()}"
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_spawn_entry, args=(r, world, cfg, init_method))
                 for r in range(world)]  # fmt: skip
        for p in procs:
            p.start()
        deadline = time.monotonic() + cfg.timeout_s
        try:
            _watch(procs, deadline, cfg, Path(tmp), world)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(5)
        return json.loads((Path(tmp) / "results.json").read_text())


def _watch(procs: list[Any], deadline: float, cfg: Config, tmp: Path, world: int) -> None:
    while True:
        codes = [p.exitcode for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            time.sleep(0.5)  # let the other ranks' errors land, so the message names them all
            codes = [p.exitcode for p in procs]
            died = ", ".join(f"rank {r} exited with code {c}" for r, c in enumerate(codes)
                             if c not in (None, 0))  # fmt: skip
            raise MeasurementError(
                f"comm: {died}; stopped the other ranks; nothing was committed "
                f"({_stages(tmp, world)})"
            )
        if all(c == 0 for c in codes):
            if not (tmp / "results.json").exists():
                raise MeasurementError("comm: ranks finished but rank 0 wrote no results")
            return
        if time.monotonic() > deadline:
            running = [str(r) for r, c in enumerate(codes) if c is None]
            raise MeasurementError(
                f"comm: rank(s) {', '.join(running)} did not finish within --timeout "
                f"{cfg.timeout_s:g} s (a rank hung, or waits on one that did); killed them; "
                f"nothing was committed ({_stages(tmp, world)})"
            )
        time.sleep(0.05)


def run_torchrun(cfg_args: dict[str, Any], tr: Torchrun, log: Any) -> dict[str, Any] | None:
    """This process is one rank; a watchdog ends it at the deadline. Rank 0 gets results."""
    from collectors.comm.worker import rank_main

    with tempfile.TemporaryDirectory(prefix=f"stepscope-comm-r{tr.rank}-") as tmp:
        cfg = Config(status_dir=tmp, **cfg_args)

        def expire() -> None:
            stage = _stage(Path(tmp), tr.rank, "starting")
            log.error(
                f"comm: rank {tr.rank} did not finish within --timeout {cfg.timeout_s:g} s "
                f"(a rank hung, died or never joined; this rank was at: {stage}); "
                "nothing was committed"
            )
            os._exit(EXIT_FAILED)

        timer = threading.Timer(cfg.timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            return rank_main(tr.rank, tr.world, cfg, "env://", tr.local_rank)
        finally:
            timer.cancel()
