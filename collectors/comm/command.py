"""``comm``: benchmark collectives (all_reduce, all_to_all, all_gather, reduce_scatter).

Sizes in serving terms (``--tokens`` x ``--hidden`` x ``--dtype``: the payload an engine
sends for that many tokens per GPU) and/or nccl-tests style byte sweeps (``--bytes``).
NCCL on GPUs, gloo on CPU. Starts its own ranks, or is one rank under torchrun
(``torchrun --nproc-per-node N -m collectors.comm ...``). Torch is imported only here, in
``run``, never when the CLI builds its help.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Any

from collectors.comm import sizes
from collectors.comm.nccl_tests_parse import nccl_version_from_code
from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError
from store.spool.bundle import Bundle, new_run_id

DEFAULT_TOKENS = "1,2,4,8,16,32,64"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("Under torchrun (one process per rank, also across hosts): torchrun "
                "--nproc-per-node N -m collectors.comm [these flags]; global rank 0 commits.")  # fmt: skip
    p.add_argument("--ops", default=",".join(sizes.OPS),
                   help=f"comma list of {', '.join(sizes.OPS)} (default: all)")  # fmt: skip
    p.add_argument("--tokens", default=None, metavar="LIST",
                   help=f"tokens per GPU, e.g. 1,2,4,8 (default {DEFAULT_TOKENS} unless "
                        "--bytes is given)")  # fmt: skip
    p.add_argument("--hidden", type=int, default=7168, help="hidden size (default 7168)")
    p.add_argument("--dtype", choices=sorted(sizes.DTYPE_BYTES), default="bf16",
                   help="element type of the payload (default bf16)")  # fmt: skip
    p.add_argument("--bytes", dest="byte_sizes", default=None, metavar="SPEC",
                   help="nccl-tests style sizes: MIN:MAX:xF (e.g. 8:1G:x2), MIN:MAX:+STEP, "
                        "or a comma list (8,64K,1M)")  # fmt: skip
    p.add_argument("--nproc", type=int, default=None,
                   help="ranks to start (default: GPUs on CUDA, 2 on CPU); ignored under "
                        "torchrun")  # fmt: skip
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda (NCCL) or cpu (gloo); auto picks cuda when available")  # fmt: skip
    p.add_argument("--iters", type=int, default=50, help="timed iterations per size (50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed iterations per size (5)")
    p.add_argument("--graph", action=argparse.BooleanOptionalAction, default=None,
                   help="time CUDA-graph replays of each collective, as decode runs them "
                        "(default on CUDA when NCCL can be captured; --no-graph: eager)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="a rank that hangs or dies ends the run after S s (default 600)")  # fmt: skip
    p.add_argument("--interconnect", choices=("pcie-only", "nvlink", "mixed", "none", "unknown"),
                   default=None, help="override the detected interconnect class")  # fmt: skip


def _check(args: argparse.Namespace) -> tuple[list[str], list[int], list[int]]:
    ops = sizes.parse_ops(args.ops)
    tokens_text = args.tokens if args.tokens is not None else (
        None if args.byte_sizes else DEFAULT_TOKENS)  # fmt: skip
    tokens = sizes.parse_tokens(tokens_text) if tokens_text else []
    byte_list = sizes.parse_bytes(args.byte_sizes) if args.byte_sizes else []
    if args.hidden <= 0:
        raise InputError(f"--hidden: {args.hidden} must be positive")
    if args.iters < 1 or args.warmup < 0:
        raise InputError("--iters must be >= 1 and --warmup >= 0")
    if args.timeout <= 0:
        raise InputError(f"--timeout: {args.timeout:g} must be positive")
    if args.nproc is not None and args.nproc < 1:
        raise InputError(f"--nproc: {args.nproc} must be >= 1")
    return ops, tokens, byte_list


def _device(args: argparse.Namespace) -> str:
    import torch

    has_cuda = torch.cuda.is_available()
    if args.device == "cuda" and not has_cuda:
        raise InputError("--device cuda: torch sees no CUDA device on this host")
    device = "cuda" if args.device == "cuda" or (args.device == "auto" and has_cuda) else "cpu"
    if args.graph and device != "cuda":
        raise InputError("--graph: CUDA-graph capture needs a GPU (device is cpu, backend "
                         "gloo); drop --graph on CPU")  # fmt: skip
    if args.graph is None:
        args.graph = device == "cuda" and graph_capture_works(torch)
    return device


# NCCL supports stream capture from 2.9.6 (NCCL release notes 2.9.6: "Add support for CUDA
# graphs"); torch's own NCCL is newer, a system NCCL may not be.
NCCL_GRAPH_MIN = (2, 9, 6)


def graph_capture_works(torch: Any) -> bool:
    """Whether this torch + NCCL can capture collectives in a CUDA graph."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - no NCCL in this torch: no capture
        return False
    if not isinstance(version, tuple):  # old torch: NCCL_VERSION_CODE, 2.9.6 -> 20906
        version = tuple(map(int, nccl_version_from_code(int(version)).split(".")))
    return hasattr(torch.cuda, "CUDAGraph") and tuple(version[:3]) >= NCCL_GRAPH_MIN


@dataclass(frozen=True)
class Link:
    interconnect: str
    gpus_used: str | None  # NVML indices of the ranks' GPUs, "0,1"
    note: str | None  # MIG or an unmatched device, for the run's message


def interconnect(device: str, uuids: list[str | None] | None = None) -> Link:
    """Interconnect class of the GPUs the ranks used (matched by UUID, else through
    ``CUDA_VISIBLE_DEVICES``), not of the whole host."""
    if device == "cpu":
        return Link("none", None, None)  # gloo over loopback TCP: no GPU link is involved
    try:
        from collectors.inventory import gpu_used, nvml

        topo = nvml.topology_inventory()
        pos = gpu_used.positions_by_uuid(topo.gpus, uuids or []) if uuids else None
        if pos is None:
            pos = gpu_used.visible_positions(os.environ.get("CUDA_VISIBLE_DEVICES"), topo.gpus)
        if pos is None and uuids:
            return Link("unknown", None, "the ranks' GPUs were not found in NVML's list")
        if pos is None:
            pos = list(range(len(topo.gpus)))
        used = gpu_used.used_interconnect(topo, pos)
    except Exception:  # noqa: BLE001 - NVML missing, partial or failing: say unknown
        return Link("unknown", None, None)
    note = None
    if used.mig:
        note = ("MIG is enabled on a GPU this run used: CUDA sees one MIG instance, NVML's "
                "figures describe the whole GPU")  # fmt: skip
    return Link(used.interconnect, ",".join(str(topo.gpus[p].index) for p in pos), note)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from collectors.comm import launch

    ops, tokens, byte_list = _check(args)
    device = _device(args)
    import torch

    tr = launch.torchrun_env()
    if tr is not None:
        world = tr.world
    elif args.nproc:
        world = args.nproc
    else:
        world = torch.cuda.device_count() if device == "cuda" else 2
    if device == "cuda" and tr is None and world > torch.cuda.device_count():
        raise InputError(f"--nproc {world}: only {torch.cuda.device_count()} GPU(s) visible")
    points = sizes.sweep(ops, tokens, byte_list, args.hidden, args.dtype, world)
    if not points:
        raise InputError("nothing to measure: every --bytes size is smaller than one element "
                         "per rank")  # fmt: skip
    backend = "nccl" if device == "cuda" else "gloo"
    cfg_args = dict(points=points, dtype=args.dtype, backend=backend, device=device,
                    iters=args.iters, warmup=args.warmup, graph=args.graph,
                    timeout_s=args.timeout, hidden=args.hidden)  # fmt: skip
    run_id = new_run_id("comm")
    ctx.log.info(f"comm: {len(points)} point(s) x {args.iters} iterations on {world} rank(s), "
                 f"{backend} on {device}{' (torchrun)' if tr else ''}")  # fmt: skip
    if tr is None:
        result = launch.run_spawned(cfg_args, world)
    else:
        result = launch.run_torchrun(cfg_args, tr, ctx.log)
        if tr.rank != 0:
            return EXIT_OK  # rank 0 commits the run
    env = ctx.environment()  # never raises: a finished sweep is not lost to NVML
    if result.get("short_prerolls"):
        ctx.log.warning(f"comm: {result['short_prerolls']} burst(s) outran their pre-roll and "
                        "were repeated with a longer one")  # fmt: skip
    return ctx.submit(*_bundle(ctx, run_id, env, result, backend, device, world, args))


def _bundle(ctx: Context, run_id: str, env: dict[str, Any], result: dict[str, Any],
            backend: str, device: str, world: int, args: argparse.Namespace
            ) -> tuple[Bundle, dict[str, Any]]:  # fmt: skip
    rows = result["rows"]
    nccl_env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}
    names = result.get("gpu_names") or []
    link = (Link(args.interconnect, None, None) if args.interconnect
            else interconnect(device, result.get("gpu_uuids")))  # fmt: skip
    if link.note:
        ctx.log.warning(f"comm: {link.note}")
    meta = {
        "source": ["comm"], "backend": [backend], "world_size": [world], "device": [device],
        "graph_mode": [bool(args.graph)], "nccl_version": [env.get("nccl") if backend == "nccl"
                                                           else None],
        "nccl_env": [json.dumps(nccl_env)],
        "interconnect": [link.interconnect], "gpus_used": [link.gpus_used],
        "timing": [_timing_name(device, bool(args.graph))],
        "pcie_gen_loaded": [result.get("pcie_gen_loaded")],
        "pcie_width_loaded": [result.get("pcie_width_loaded")],
        "gpu_names": [" + ".join(sorted(set(names))) if names else None],
        "avg_busbw_gbps": [_mean([r["busbw_gbps"] for r in rows])],
    }  # fmt: skip
    columns = ("op", "dtype", "tokens_per_rank", "hidden", "bytes", "count", "in_place",
               "iters", "p50_us", "p10_us", "p90_us", "min_us", "mean_us", "algbw_gbps",
               "busbw_gbps", "burst_us", "burst_algbw_gbps", "burst_busbw_gbps",
               "wrong")  # fmt: skip
    results = {c: [r[c] for r in rows] for c in columns}
    wrong = sum(r["wrong"] for r in rows)
    notes = [f"{wrong} element(s) differed from the expected result" if wrong else None,
             link.note]  # fmt: skip
    record = ctx.run_record(
        run_id, env=env, status="ok" if not wrong else "partial",
        message="; ".join(n for n in notes if n) or None,
    )  # fmt: skip
    summary = {
        "backend": backend, "world_size": world, "device": device,
        "interconnect": meta["interconnect"][0], "graph_mode": bool(args.graph),
        "gpus_used": link.gpus_used,
        "results": [{k: r[k] for k in ("op", "tokens_per_rank", "bytes", "p50_us", "p10_us",
                                       "p90_us", "busbw_gbps", "burst_us", "burst_busbw_gbps")}
                    for r in rows],
    }  # fmt: skip
    return Bundle(record, {"comm_meta": meta, "comm_results": results}), summary


def _timing_name(device: str, graph: bool) -> str:
    if device == "cpu":
        return "host perf_counter"
    return "cuda events after a pre-roll" + (", cuda-graph replays" if graph else ", eager")


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
