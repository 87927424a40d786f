"""What each rank runs: init the process group, time every point, hand rank 0 the results.

Imports torch; only rank processes (or a torchrun rank) load this module.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from collectors.comm import metrics
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
    meta: dict[str, Any] = field(default_factory=dict)


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


def _time_cpu(op: _Op, iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        op.call()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return times


def _time_cuda(torch: Any, call: Any, iters: int) -> list[float]:
    """CUDA events around each call, back to back on the stream, read after one sync."""
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(iters)]  # fmt: skip
    for start, end in pairs:
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) * 1e3 for start, end in pairs]


def _graphed(torch: Any, op: _Op) -> Any:
    """Capture one call in a CUDA graph (decode runs collectives this way); return replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        op.call()  # warm-up on a side stream before capture, as torch asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op.call()
    torch.cuda.synchronize()
    return graph.replay


def rank_main(rank: int, world: int, cfg: Config, init_method: str) -> dict[str, Any] | None:
    """Run the whole sweep on this rank; rank 0 returns (and writes) the merged results."""
    import torch
    import torch.distributed as dist

    _status(cfg, rank, "starting: joining the process group")
    device = "cpu"
    if cfg.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    dist.init_process_group(
        cfg.backend, init_method=init_method, rank=rank, world_size=world,
        timeout=timedelta(seconds=max(cfg.timeout_s, 1.0)),
    )  # fmt: skip
    try:
        _status(cfg, rank, "joined the process group")
        _fault(rank)
        dtype = getattr(torch, _TORCH_DTYPES[cfg.dtype])
        per_point = []
        for i, point in enumerate(cfg.points):
            where = f"point {i + 1}/{len(cfg.points)}: {point.op} {point.bytes} B"
            _status(cfg, rank, f"{where} (warm-up and check)")
            op = _Op(torch, dist, point, dtype, device, world)
            wrong = op.wrong_elements(rank)
            call = _graphed(torch, op) if cfg.graph else op.call
            for _ in range(cfg.warmup):
                call()
            if cfg.device == "cuda":
                torch.cuda.synchronize()
            dist.barrier()
            _status(cfg, rank, f"{where} (timing {cfg.iters} iterations)")
            if cfg.device == "cuda":
                times = _time_cuda(torch, call, cfg.iters)
            else:
                times = _time_cpu(op, cfg.iters)
            per_point.append({"times": times, "wrong": wrong})
        _status(cfg, rank, "sweep done: sending results to rank 0")
        name = torch.cuda.get_device_name(device) if cfg.device == "cuda" else None
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, {"points": per_point, "device_name": name})
        _status(cfg, rank, "done")
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    result = _merge(cfg, world, gathered)
    out = Path(cfg.status_dir) / "results.json"
    out.with_suffix(".tmp").write_text(json.dumps(result))
    os.replace(out.with_suffix(".tmp"), out)
    return result


def _merge(cfg: Config, world: int, gathered: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for i, point in enumerate(cfg.points):
        per_rank = [g["points"][i]["times"] for g in gathered]
        stats = metrics.latency_stats(metrics.slowest_rank_per_iter(per_rank))
        rows.append({
            **asdict(point),
            "dtype": cfg.dtype,
            "hidden": cfg.hidden if point.tokens_per_rank is not None else None,
            "in_place": point.op == "all_reduce",
            **asdict(stats),
            # From the median iteration: robust to the odd slow iteration on a busy host.
            "algbw_gbps": metrics.algbw_gbps(point.bytes, stats.p50_us),
            "busbw_gbps": metrics.busbw_gbps(point.op, point.bytes, stats.p50_us, world),
            "wrong": sum(g["points"][i]["wrong"] for g in gathered),
        })  # fmt: skip
    names = [g["device_name"] for g in gathered if g.get("device_name")]
    return {"rows": rows, "gpu_names": names}
