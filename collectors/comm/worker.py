"""What each rank runs: init the process group, time every point, hand rank 0 the results.

Imports torch; only rank processes (or a torchrun rank) load this module.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from collectors.comm import metrics, timing
from collectors.comm.sizes import Point

FAULT_ENV = "STEPSCOPE_COMM_FAULT"  # "hang:RANK" or "die:RANK": exercises the watchdog
_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass
class Config:
    points: list[Point]
    dtype: str
    backend: str  # nccl | gloo
    device: str  # cuda | cpu
    iters: int
    warmup: int
    graph: bool
    timeout_s: float
    status_dir: str  # each rank writes its progress here; rank 0 writes results.json
    hidden: int | None = None


def _status(cfg: Config, rank: int, text: str) -> None:
    """Last known stage of this rank: what a timeout message reports."""
    path = Path(cfg.status_dir) / f"rank{rank}.status"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _fault(rank: int) -> None:
    kind, _, target = os.environ.get(FAULT_ENV, "").partition(":")
    if target.strip() != str(rank):
        return
    if kind == "hang":
        time.sleep(10**6)
    elif kind == "die":
        os._exit(3)


class _Op:
    """Tensors and the call for one point; ``expected`` checks a verification pass."""

    def __init__(self, torch: Any, dist: Any, point: Point, dtype: Any, device: str, world: int):
        self.torch, self.dist, self.point, self.world = torch, dist, point, world
        n, op = point.bytes // dtype.itemsize, point.op  # every element of the op's buffer
        zeros = lambda k: torch.zeros(k, dtype=dtype, device=device)  # noqa: E731
        if op == "all_reduce":
            self.inp = self.out = zeros(n)  # in place, as engines call it
            self.call = lambda: dist.all_reduce(self.out)
        elif op == "all_to_all":
            self.inp, self.out = zeros(n), zeros(n)
            self.call = lambda: dist.all_to_all_single(self.out, self.inp)
        elif op == "all_gather":
            # all_gather_single is the name torch>=2.13 prefers; older ones have _into_tensor.
            ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            self.inp, self.out = zeros(n // world), zeros(n)
            self.call = lambda: ag(self.out, self.inp)
        elif op == "reduce_scatter":
            # reduce_scatter_single is the name torch>=2.13 prefers; older ones have _tensor.
            rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            self.inp, self.out = zeros(n), zeros(n // world)
            self.call = lambda: rs(self.out, self.inp)
        else:
            raise ValueError(f"unknown op {op}")

    def wrong_elements(self, rank: int) -> int:
        """Fill inputs with rank+1, run once, count elements that differ from the truth."""
        torch, world = self.torch, self.world
        self.inp.fill_(rank + 1)
        self.call()
        total = world * (world + 1) // 2
        if self.point.op in ("all_reduce", "reduce_scatter"):
            expected = torch.full_like(self.out, total)
        else:  # chunk j came from rank j
            chunk = self.out.numel() // world
            values = torch.arange(1, world + 1, dtype=self.out.dtype, device=self.out.device)
            expected = values.repeat_interleave(chunk)
        wrong = int((self.out != expected).sum().item())
        self.inp.zero_()  # timed loops run on zeros: sums never overflow
        self.out.zero_()
        return wrong


def _bind_device(torch: Any, cfg: Config, local_rank: int) -> str:
    """This rank's device. ``local_rank`` comes from the launcher: the spawn index for
    ranks started here (a ``LOCAL_RANK`` left in the shell must not pin every rank to one
    GPU), torchrun's ``LOCAL_RANK`` under torchrun."""
    if cfg.device != "cuda":
        return "cpu"
    torch.cuda.set_device(local_rank)
    return f"cuda:{local_rank}"


def init_kwargs(torch: Any, cfg: Config, device: str) -> dict[str, Any]:
    """``device_id`` binds the NCCL communicator to this rank's GPU at init (eager init, and
    no guessing the device from the current one: torch/distributed/distributed_c10d.py
    ``init_process_group(device_id=...)``, torch >= 2.3)."""
    kwargs: dict[str, Any] = {"timeout": timedelta(seconds=max(cfg.timeout_s, 1.0))}
    if cfg.device == "cuda":
        kwargs["device_id"] = torch.device(device)
    return kwargs


def measure_point(torch: Any, dist: Any, op: _Op, cfg: Config, timer: timing.Timer,
                  graphs: timing.Graphs | None) -> timing.Burst:  # fmt: skip
    """Warm up, line the ranks up, time one burst; a captured graph is released at once."""
    call = graphs.capture(op.call) if graphs is not None else op.call
    try:
        for _ in range(cfg.warmup):
            call()
        if cfg.device == "cuda":
            torch.cuda.synchronize()
        dist.barrier()
        return timer.burst(call, cfg.iters)
    finally:
        if graphs is not None:
            graphs.release()


def rank_main(rank: int, world: int, cfg: Config, init_method: str,
              local_rank: int | None = None) -> dict[str, Any] | None:  # fmt: skip
    """Run the whole sweep on this rank; rank 0 returns (and writes) the merged results."""
    import torch
    import torch.distributed as dist

    from collectors.inventory.gpu_used import PcieSampler

    _status(cfg, rank, "starting: joining the process group")
    device = _bind_device(torch, cfg, rank if local_rank is None else local_rank)
    dist.init_process_group(cfg.backend, init_method=init_method, rank=rank, world_size=world,
                            **init_kwargs(torch, cfg, device))  # fmt: skip
    graphs = timing.Graphs(torch) if cfg.graph else None
    try:
        _status(cfg, rank, "joined the process group")
        _fault(rank)
        dtype = getattr(torch, _TORCH_DTYPES[cfg.dtype])
        cuda = cfg.device == "cuda"
        timer: timing.Timer = timing.CudaTimer(torch) if cuda else timing.CpuTimer()
        uuid = str(torch.cuda.get_device_properties(device).uuid) if cuda else None
        per_point = []
        with PcieSampler(uuid) as pcie:
            for i, point in enumerate(cfg.points):
                where = f"point {i + 1}/{len(cfg.points)}: {point.op} {point.bytes} B"
                _status(cfg, rank, f"{where} (warm-up, check and {cfg.iters} timed calls)")
                op = _Op(torch, dist, point, dtype, device, world)
                wrong = op.wrong_elements(rank)
                burst = measure_point(torch, dist, op, cfg, timer, graphs)
                per_point.append({"times": burst.per_call_us, "burst_us": burst.burst_us,
                                  "wrong": wrong})  # fmt: skip
        _status(cfg, rank, "sweep done: sending results to rank 0")
        mine = {"points": per_point, "device_name": torch.cuda.get_device_name(device)
                if cuda else None, "uuid": uuid, "pcie_gen": pcie.gen, "pcie_width": pcie.width,
                "short_prerolls": getattr(timer, "short_prerolls", 0)}  # fmt: skip
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine)
        _status(cfg, rank, "done")
    finally:
        timing.teardown(graphs, dist)
    if rank != 0:
        return None
    result = _merge(cfg, world, gathered)
    out = Path(cfg.status_dir) / "results.json"
    out.with_suffix(".tmp").write_text(json.dumps(result))
    os.replace(out.with_suffix(".tmp"), out)
    return result


def _merge(cfg: Config, world: int, gathered: list[dict[str, Any]]) -> dict[str, Any]:
    """Both figures per point: our per-call percentiles (each call's slowest rank) and
    nccl-tests' (each rank's burst mean, averaged over ranks)."""
    rows = []
    for i, point in enumerate(cfg.points):
        per_rank = [g["points"][i]["times"] for g in gathered]
        stats = metrics.latency_stats(metrics.slowest_rank_per_iter(per_rank))
        burst = metrics.ranks_mean([g["points"][i]["burst_us"] for g in gathered])
        rows.append({
            **asdict(point),
            "dtype": cfg.dtype,
            "hidden": cfg.hidden if point.tokens_per_rank is not None else None,
            "in_place": point.op == "all_reduce",
            **asdict(stats),
            # From the median call: robust to the odd slow call on a busy host.
            "algbw_gbps": metrics.algbw_gbps(point.bytes, stats.p50_us),
            "busbw_gbps": metrics.busbw_gbps(point.op, point.bytes, stats.p50_us, world),
            "burst_us": burst,
            "burst_algbw_gbps": metrics.algbw_gbps(point.bytes, burst),
            "burst_busbw_gbps": metrics.busbw_gbps(point.op, point.bytes, burst, world),
            "wrong": sum(g["points"][i]["wrong"] for g in gathered),
        })  # fmt: skip
    names = [g["device_name"] for g in gathered if g.get("device_name")]
    gens = [g.get("pcie_gen") for g in gathered]
    widths = [g.get("pcie_width") for g in gathered]
    return {
        "rows": rows, "gpu_names": names, "gpu_uuids": [g.get("uuid") for g in gathered],
        # The slowest used link under load bounds the collective: min over ranks.
        "pcie_gen_loaded": min(gens) if gens and None not in gens else None,
        "pcie_width_loaded": min(widths) if widths and None not in widths else None,
        "short_prerolls": sum(g.get("short_prerolls", 0) for g in gathered),
    }  # fmt: skip
