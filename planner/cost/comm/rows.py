"""Comm curves from the store's rows (``v_comm_results``) and the curves published for
preset GPUs; planner.cost.comm picks among them for a host."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from planner.cost.comm.curve import CommCurve
from store import bounds

_OP_NAMES = {"allreduce": "all_reduce", "alltoall": "all_to_all", "alltoallv": "all_to_all",
             "allgather": "all_gather", "reducescatter": "reduce_scatter"}  # fmt: skip
_FAST_BACKENDS = ("flashinfer", "ipc", "custom", "symm", "quick", "one_shot", "oneshot")
_FULL_DTYPES = ("bf16", "bfloat16", "fp16", "float16", "half", "fp32", "float32", "float", "")
DEFAULT_ALPHA_US = {"nvlink": 8.0, "pcie": 27.0}  # when the host spec gives no link latency
DEFAULT_BUSBW_GBPS = {"pcie": 30.0, "nvlink": 350.0}  # until a host's spec sheet binds it


# ---- measured rows (v_comm_results) -> curves ------------------------------------------
def normalize_op(op: str, backend: str = "") -> str | None:
    key = re.sub(r"[^a-z]", "", str(op).lower().removeprefix("nccl:"))
    name = _OP_NAMES.get(key)
    if name == "all_reduce" and any(b in str(backend).lower() for b in _FAST_BACKENDS):
        return "all_reduce_fast"
    return name


def _dtype_size(dtype: str) -> float:
    d = str(dtype or "").lower()
    return 4.0 if "32" in d or d == "float" else 1.0 if "8" in d else 2.0


def curves_from_rows(
    rows: list[dict[str, Any]], interconnect: str = "pcie", devices: tuple[str, ...] = ("cuda",),
    chosen: bool = False,
) -> list[CommCurve]:
    """Curves from ``v_comm_results`` rows; one curve per (op, world size, run), full-precision
    dtypes only (an FP8 collective is a downcast, never a baseline). Only runs on ``devices``
    count (a gloo/CPU run says nothing about GPUs unless a caller asks for it by run id).
    ``chosen``: the user named these runs (``--comm-run``). Each curve keeps the GPUs its run
    names (``gpu_names``), and beyond its sizes its own bandwidth (planner.cost.comm.curve)."""
    groups: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    labels: dict[str, str] = {}
    gpus: dict[str, str] = {}
    for r in rows:
        if str(r.get("dtype") or "").lower() not in _FULL_DTYPES:
            continue
        if devices and str(r.get("device") or "cuda").lower() not in devices:
            continue
        op = normalize_op(r.get("op", ""), r.get("backend") or "")
        us, n = r.get("p50_us"), int(r.get("world_size") or 0)
        if not op or not _ok(us) or not bounds.COMM_US.ok(float(us)) or n < 2:
            continue  # a time no collective takes (store/bounds.py): not a curve point
        tpr, hidden = r.get("tokens_per_rank"), r.get("hidden")
        if _ok(r.get("bytes")):  # nccl-tests' size: all-to-all counts every destination
            nbytes = float(r["bytes"]) / (n if op == "all_to_all" else 1)
        elif _ok(tpr) and _ok(hidden):
            per_rank = float(tpr) * float(hidden) * _dtype_size(r.get("dtype"))
            nbytes = per_rank * (n if op in ("all_gather", "reduce_scatter") else 1)
        else:
            continue
        run_id = str(r.get("run_id"))
        labels[run_id] = ", ".join(str(r[k]) for k in ("backend", "device") if r.get(k))
        gpus[run_id] = _text(r.get("gpu_names")) or _text(r.get("gpu_model"))
        groups.setdefault((op, n, run_id), []).append((nbytes, float(us)))
    curves = []
    link = "nvlink" if interconnect == "nvlink" else "pcie"
    for (op, n, run_id), pts in groups.items():
        by_size: dict[float, list[float]] = {}
        for b, us in pts:
            by_size.setdefault(b, []).append(us)
        xs = sorted(by_size)
        ys = [float(np.median(by_size[x])) for x in xs]
        curves.append(CommCurve(
            op=op, world_size=n, bytes=tuple(xs), us=tuple(ys), kind="measured",
            source=f"measured comm run {run_id}" + (f" ({labels[run_id]})" if labels[run_id] else ""),
            tail_busbw_gbps=None, gpu_model=gpus[run_id], chosen=chosen,
            spec_latency_us=DEFAULT_ALPHA_US[link], spec_busbw_gbps=DEFAULT_BUSBW_GBPS[link],
        ))  # fmt: skip
    return curves


def _text(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


def _ok(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v)) and float(v) > 0
    except (TypeError, ValueError):
        return False


# ---- published curves for hardware presets ---------------------------------------------
_AIC = "published: NVIDIA AIConfigurator NCCL 2.29.2, 8x RTX PRO 6000 Server, bf16"
PUBLISHED: dict[str, tuple[CommCurve, ...]] = {
    "rtx-pro-6000-pcie-8x": (
        CommCurve("all_reduce", 8, (8192.0, 16384.0, 131072.0), (26.7, 27.0, 47.8),
                  "published", _AIC + " (REFERENCE §5)"),
        # all-to-all sizes are per-rank totals there: /8 gives bytes per destination.
        CommCurve("all_to_all", 8, (1024.0, 2048.0, 16384.0), (12.7, 13.0, 45.3),
                  "published", _AIC + " (REFERENCE §5)"),
    ),
}  # fmt: skip


def published_for(gpu_model: str, gpu_count: int) -> list[CommCurve]:
    """Published curves measured on the same GPU model and count (labelled published)."""
    if "rtx pro 6000" in gpu_model.lower() and gpu_count == 8:
        return list(PUBLISHED["rtx-pro-6000-pcie-8x"])
    return []
