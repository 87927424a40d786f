"""Communication cost: latency per collective from measured curves, else a labelled fallback.

The x axis of every curve is the payload *per rank* in bytes: for AllReduce the message
(tokens x hidden x dtype), for all-to-all the bytes one rank sends to each destination
(tokens per rank x hidden x dtype: the write-up's "14,336 B per destination"), for
AllGather / ReduceScatter the gathered total. Between points: log-log interpolation; below
the first point: its latency (the latency floor); beyond the last: that latency plus the
extra bytes over the bus bandwidth (a bandwidth tail, labelled as an extrapolation).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

OPS = ("all_reduce", "all_reduce_fast", "all_to_all", "all_gather", "reduce_scatter")
_OP_NAMES = {"allreduce": "all_reduce", "alltoall": "all_to_all", "alltoallv": "all_to_all",
             "allgather": "all_gather", "reducescatter": "reduce_scatter"}  # fmt: skip
_FAST_BACKENDS = ("flashinfer", "ipc", "custom", "symm", "quick", "one_shot", "oneshot")
_FULL_DTYPES = ("bf16", "bfloat16", "fp16", "float16", "half", "fp32", "float32", "float", "")
# Alpha-beta fallback constants by interconnect class. PCIe: AIConfigurator's measured NCCL
# small-message latencies on 8x RTX PRO 6000 (REFERENCE §5) and the middle of the 22-41 GB/s
# measured AllReduce busbw; NVLink: typical NCCL figures on 8x H100/H200 (assumed).
_ALPHA_US = {"pcie": {"all_reduce": 27.0, "all_to_all": 13.0, "all_gather": 15.0,
                      "reduce_scatter": 15.0},
             "nvlink": {"all_reduce": 12.0, "all_to_all": 10.0, "all_gather": 8.0,
                        "reduce_scatter": 8.0}}  # fmt: skip
_BUSBW_GBPS = {"pcie": 30.0, "nvlink": 350.0}
# SGLang's PCIe-IPC AllReduce cut TPOT 21.14 -> 13.62 ms at TP8 (REFERENCE §2): 7.52 ms over
# the 123 AllReduces of a 61-layer step is about 61 us per call.
FAST_ALLREDUCE_SAVING_US = (21.14 - 13.62) * 1000 / 123


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor: 2(n-1)/n for AllReduce, (n-1)/n otherwise."""
    n = max(n, 1)
    return 2 * (n - 1) / n if op.startswith("all_reduce") else (n - 1) / n


@dataclass(frozen=True)
class CommCurve:
    """Latency (us) vs bytes per rank for one collective on one world size."""

    op: str
    world_size: int
    bytes: tuple[float, ...]
    us: tuple[float, ...]
    kind: str  # measured | published | derived | fallback
    source: str
    tail_busbw_gbps: float = 30.0
    # Derived curves: latency = max(base - shift_us, floor_frac * base) * scale.
    scale: float = 1.0
    shift_us: float = 0.0
    floor_frac: float = 0.0
    bus_op: str = ""  # derived curves keep their base op's bus factor in the tail

    def latency_us(self, nbytes: np.ndarray | float) -> np.ndarray:
        b = np.maximum(np.asarray(nbytes, dtype=float), 1.0)
        xs, ys = np.log(self.bytes), np.log(self.us)
        out = np.exp(np.interp(np.log(b), xs, ys)) if len(xs) > 1 else np.full_like(b, self.us[0])
        last = self.bytes[-1]
        tail = self.us[-1] + (b - last) * bus_factor(self.bus_op or self.op, self.world_size) / (
            self.tail_busbw_gbps * 1e9) * 1e6  # fmt: skip
        out = np.where(b > last, tail, out)
        if self.shift_us or self.floor_frac:
            out = np.maximum(out - self.shift_us, self.floor_frac * out)
        return out * self.scale

    @property
    def max_bytes(self) -> float:
        return self.bytes[-1]

    def describe(self) -> str:
        span = (
            f"{len(self.bytes)} point(s), {_fmt_bytes(self.bytes[0])}-{_fmt_bytes(self.bytes[-1])}"
            if self.kind in ("measured", "published")
            else "derived"
            if self.kind == "derived"
            else "alpha-beta"
        )
        return f"{self.op} ({self.world_size} GPUs): {self.source} [{span}]"


def _fmt_bytes(b: float) -> str:
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b:.0f} B"


def alpha_beta(op: str, n: int, interconnect: str) -> CommCurve:
    klass = "nvlink" if interconnect == "nvlink" else "pcie"
    base = "all_reduce" if op == "all_reduce_fast" else op
    alpha = _ALPHA_US[klass][base]
    bw = _BUSBW_GBPS[klass]
    return CommCurve(
        op=op, world_size=n, bytes=(1024.0,), us=(alpha,), kind="fallback",
        source=f"alpha-beta fallback ({klass}: alpha {alpha:g} us, busbw {bw:g} GB/s)",
        tail_busbw_gbps=bw,
    )  # fmt: skip


class CommSet:
    """The curves one plan uses, with fallbacks filled in on first use (and listed)."""

    def __init__(self, curves: list[CommCurve], n: int, interconnect: str) -> None:
        self.n, self.interconnect = n, interconnect
        self._curves: dict[str, CommCurve] = {}
        for c in curves:
            if c.world_size == n:  # another world size's curve would mislead: fall back
                self._curves.setdefault(c.op, c)

    def get(self, op: str) -> CommCurve:
        if op in self._curves:
            return self._curves[op]
        curve: CommCurve
        if op in ("all_gather", "reduce_scatter"):
            ar = self.get("all_reduce")
            curve = CommCurve(
                op=op, world_size=ar.world_size, bytes=ar.bytes, us=ar.us, kind="derived",
                source=f"half the AllReduce curve (ring AllReduce = ReduceScatter + AllGather; "
                f"AllReduce from {ar.source})", tail_busbw_gbps=ar.tail_busbw_gbps, scale=0.5,
                bus_op="all_reduce",
            )  # fmt: skip
        elif op == "all_reduce_fast":
            ar = self.get("all_reduce")
            curve = CommCurve(
                op=op, world_size=ar.world_size, bytes=ar.bytes, us=ar.us, kind="derived",
                source=f"NCCL AllReduce less {FAST_ALLREDUCE_SAVING_US:.0f} us per call (SGLang "
                "PCIe-IPC AllReduce: TPOT 21.14 -> 13.62 ms at TP8, REFERENCE §2), floor 25%",
                tail_busbw_gbps=ar.tail_busbw_gbps, shift_us=FAST_ALLREDUCE_SAVING_US,
                floor_frac=0.25, bus_op="all_reduce",
            )  # fmt: skip
        else:
            curve = alpha_beta(op, self.n, self.interconnect)
        self._curves[op] = curve
        return curve

    def latency_us(self, op: str, nbytes: np.ndarray | float) -> np.ndarray:
        return self.get(op).latency_us(nbytes)

    def used(self) -> list[CommCurve]:
        return [self._curves[k] for k in OPS if k in self._curves]


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
    rows: list[dict[str, Any]], interconnect: str = "pcie", devices: tuple[str, ...] = ("cuda",)
) -> list[CommCurve]:
    """Curves from ``v_comm_results`` rows; one curve per (op, world size, run), full-precision
    dtypes only (an FP8 collective is a downcast, never a baseline). Only runs on ``devices``
    count (a gloo/CPU run says nothing about GPUs unless a caller asks for it by run id)."""
    groups: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    labels: dict[str, str] = {}
    for r in rows:
        if str(r.get("dtype") or "").lower() not in _FULL_DTYPES:
            continue
        if devices and str(r.get("device") or "cuda").lower() not in devices:
            continue
        op = normalize_op(r.get("op", ""), r.get("backend") or "")
        us, n = r.get("p50_us"), int(r.get("world_size") or 0)
        if not op or not _ok(us) or n < 2:
            continue
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
        groups.setdefault((op, n, run_id), []).append((nbytes, float(us)))
    curves = []
    for (op, n, run_id), pts in groups.items():
        by_size: dict[float, list[float]] = {}
        for b, us in pts:
            by_size.setdefault(b, []).append(us)
        xs = sorted(by_size)
        ys = [float(np.median(by_size[x])) for x in xs]
        curves.append(CommCurve(
            op=op, world_size=n, bytes=tuple(xs), us=tuple(ys), kind="measured",
            source=f"measured comm run {run_id}" + (f" ({labels[run_id]})" if labels[run_id] else ""),
            tail_busbw_gbps=_BUSBW_GBPS["nvlink" if interconnect == "nvlink" else "pcie"],
        ))  # fmt: skip
    return curves


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
