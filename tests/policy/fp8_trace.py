"""Write a small Kineto chrome-trace file of decode steps whose AllReduce runs in FP8.

No public trace with an FP8 collective is available, so tests write one in the real
format (REFERENCE §6): top-level keys, ``distributedInfo``, step annotations in vLLM's
naming, ``cuda_runtime`` launches linked to kernels by ``correlation``, NCCL kernels with
``Collective name`` / ``In msg nelems`` / ``Group size`` / ``dtype`` args.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

BASE_NS = 1_764_460_800_000_000_000
LAYERS = 4  # AllReduces per step


def _kernel(name: str, ts: float, dur: float, corr: int, extra: dict | None = None) -> dict:
    args = {"External id": corr, "device": 0, "stream": 7, "correlation": corr,
            "registers per thread": 32, "shared memory": 0, "grid": [64, 1, 1],
            "block": [256, 1, 1], "context": 1}  # fmt: skip
    args.update(extra or {})
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
            "ts": round(ts, 3), "dur": round(dur, 3), "args": args}  # fmt: skip


def _launch(ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242,
            "tid": 4242, "ts": round(ts, 3), "dur": 4.25,
            "args": {"External id": corr, "cbid": 211, "correlation": corr}}  # fmt: skip


def fp8_allreduce_events(steps: int = 3, dtype: str = "f8e4m3") -> list[dict]:
    """Per step: LAYERS x (gemm, [FP8 quantize,] AllReduce) under a step annotation; the
    quantize kernel only where the AllReduce is FP8."""
    events: list[dict] = []
    ts, corr = 1_000.0, 100
    torch_dtype = {"f8e4m3": "Float8_e4m3fn", "bf16": "BFloat16"}[dtype]
    for step in range(steps):
        name = f"execute_context_0(0)_generation_8(8)_step{step}"
        start = ts
        for _ in range(LAYERS):
            for kname, dur, extra in (
                ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64", 21.5, None),
                ("void vllm::per_token_quant_fp8_kernel<__nv_bfloat16>", 3.125, None),
                (f"ncclDevKernel_AllReduce_Sum_{dtype}_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                 38.75, {"Collective name": "allreduce", "In msg nelems": 57344,
                         "Out msg nelems": 57344, "Group size": 2, "dtype": torch_dtype,
                         "Process Group Name": "0", "Process Group Ranks": "[0, 1]"}),
            ):  # fmt: skip
                if "quant" in kname and dtype == "bf16":
                    continue
                events.append(_launch(ts - 5.0, corr))
                events.append(_kernel(kname, ts, dur, corr, extra))
                ts += dur + 1.5
                corr += 1
        for cat in ("user_annotation", "gpu_user_annotation"):
            events.append({"ph": "X", "cat": cat, "name": name, "pid": 4242 if cat[0] == "u" else 0,
                           "tid": 4242 if cat[0] == "u" else 7, "ts": round(start - 0.5, 3),
                           "dur": round(ts - start + 1.0, 3),
                           "args": {"External id": 10_000 + step}})  # fmt: skip
        ts += 50.0
    return events


def write_trace(path: Path, dtype: str = "f8e4m3", rank: int = 0, world: int = 2) -> Path:
    """Write ``path`` (.json or .json.gz) and return it."""
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world,
                            "pg_count": 1, "pg_config": [], "nccl_version": "2.21.5"},
        "record_shapes": 1,
        "with_stack": 0,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": fp8_allreduce_events(dtype=dtype),
        "traceName": str(path),
    }  # fmt: skip
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def import_fp8_and_bf16_runs(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A store holding one FP8-AllReduce and one BF16-AllReduce trace run, imported through
    the real ``python -m collectors trace``; returns the store and ``{label: run_id}``."""
    from tests.helpers import run_cli

    store = tmp / "stepscope.duckdb"
    ids = {}
    for label, dtype in (("fp8-allreduce", "f8e4m3"), ("bf16-allreduce", "bf16")):
        trace = write_trace(tmp / f"{label}.pt.trace.json.gz", dtype=dtype)
        res = run_cli(store, "trace", str(trace), "--label", label, "--json")
        assert res.code == 0, res.stderr
        ids[label] = res.json["run_id"]
    return store, ids
