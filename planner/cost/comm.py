"""Communication cost: latency per collective and world size, and where each curve came from.

The x axis of every curve is the payload *per rank* in bytes: for AllReduce the message
(tokens x hidden x dtype), for all-to-all the bytes one rank sends to each destination
(tokens per rank x hidden x dtype: the write-up's "14,336 B per destination"), for
AllGather / ReduceScatter the gathered total. Between points: log-log interpolation; below
the first point: its latency (the latency floor); beyond the last: that latency plus the
extra bytes over the bus bandwidth (a bandwidth tail, labelled as an extrapolation).

Every curve has a kind, in order of trust: ``measured`` (a comm run in the store, on this
host), ``published`` (a published figure for the same GPUs), ``derived`` (another op's curve
under a stated rule) or ``spec`` (alpha-beta from the host's spec sheet: the link latency
and the link bandwidth the serving model's fit assumes). The planner calls a layout a
hypothesis when it rests on a collective the fit never saw that nobody measured here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner.specs.hardware import HardwareSpec
from store import bounds

OPS = ("all_reduce", "all_reduce_fast", "all_to_all", "all_gather", "reduce_scatter")
_OP_NAMES = {"allreduce": "all_reduce", "alltoall": "all_to_all", "alltoallv": "all_to_all",
             "allgather": "all_gather", "reducescatter": "reduce_scatter"}  # fmt: skip
_FAST_BACKENDS = ("flashinfer", "ipc", "custom", "symm", "quick", "one_shot", "oneshot")
_FULL_DTYPES = ("bf16", "bfloat16", "fp16", "float16", "half", "fp32", "float32", "float", "")
# Collectives the serving model's fit covers (NCCL AllReduce under TP, AllGather +
# ReduceScatter under attention-DP, on spec-sheet figures): their error is in the band. The
# others rest on a derived or spec-sheet curve until measured on the host.
FITTED_OPS = ("all_reduce", "all_gather", "reduce_scatter")
_DEFAULT_ALPHA_US = {"nvlink": 8.0, "pcie": 27.0}  # when the host spec gives no link latency
_TAIL_BUSBW_GBPS = {"pcie": 30.0, "nvlink": 350.0}  # beyond a measured curve's last point


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor: 2(n-1)/n for AllReduce, (n-1)/n otherwise."""
    n = max(n, 1)
    return 2 * (n - 1) / n if op.startswith("all_reduce") else (n - 1) / n


def wire_factor(op: str, n: int) -> float:
    """Bytes one rank moves over its link per byte of the curve's x axis: nccl-tests' bus
    factor, except all-to-all, whose x axis is one destination's share (sent n - 1 times)."""
    return float(max(n, 1) - 1) if op == "all_to_all" else bus_factor(op, n)


@dataclass(frozen=True)
class CommCurve:
    """Latency (us) vs bytes per rank for one collective on one world size."""

    op: str
    world_size: int
    bytes: tuple[float, ...]
    us: tuple[float, ...]
    kind: str  # measured | published | derived | spec
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
        tail = self.us[-1] + (b - last) * wire_factor(self.bus_op or self.op, self.world_size) / (
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
            else "spec-sheet alpha-beta"
        )
        return f"{self.op} ({self.world_size} GPUs): {self.source} [{span}]"


def _fmt_bytes(b: float) -> str:
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b:.0f} B"


# SGLang's PCIe-IPC AllReduce cut TPOT 21.14 -> 13.62 ms at TP8 (REFERENCE §2): 7.52 ms over
# the 123 AllReduces of a 61-layer step is about 61 us per call.
FAST_ALLREDUCE_SAVING_US = (21.14 - 13.62) * 1000 / 123


def spec_curve(op: str, n: int, hw: HardwareSpec, link_eff: float) -> CommCurve:
    """alpha + bytes on the wire / achieved link bandwidth, from the host's spec sheet."""
    alpha = hw.link_latency_us or _DEFAULT_ALPHA_US.get(hw.interconnect, 27.0)
    bw = hw.link_gbps * link_eff
    return CommCurve(
        op=op, world_size=n, bytes=(1.0,), us=(alpha,), kind="spec",
        source=f"spec sheet of {hw.name}: {alpha:g} us + bytes over {bw:.0f} GB/s "
        f"({hw.interconnect}, {link_eff:.0%} of {hw.link_gbps:g} GB/s)",
        tail_busbw_gbps=bw,
    )  # fmt: skip


class CommSet:
    """The collectives one plan or prediction uses: each (op, world size) from the best curve
    there is (measured, published, derived, spec), remembered so the plan can list them."""

    def __init__(self, curves: list[CommCurve], hw: HardwareSpec, link_eff: float = 0.7) -> None:
        self.hw, self.link_eff = hw, link_eff
        self._given: dict[tuple[str, int], CommCurve] = {}
        for c in sorted(curves, key=lambda c: c.kind != "measured"):  # measured win
            if c.kind in ("measured", "published"):
                self._given.setdefault((c.op, c.world_size), c)
        self._used: dict[tuple[str, int], CommCurve] = {}

    def get(self, op: str, n: int) -> CommCurve:
        key = (op, n)
        if key in self._used:
            return self._used[key]
        curve = self._given.get(key) or self._derive(op, n)
        self._used[key] = curve
        return curve

    def _derive(self, op: str, n: int) -> CommCurve:
        ar = self._given.get(("all_reduce", n))
        if op in ("all_gather", "reduce_scatter") and ar is not None:
            return replace(ar, op=op, kind="derived", scale=0.5, bus_op="all_reduce",
                           source="half the AllReduce curve (ring AllReduce = ReduceScatter + "
                           f"AllGather; AllReduce from {ar.source})")  # fmt: skip
        if op == "all_reduce_fast":
            base = self.get("all_reduce", n)
            return replace(
                base, op=op, kind="derived", shift_us=FAST_ALLREDUCE_SAVING_US,
                floor_frac=0.25, bus_op="all_reduce",
                source=f"NCCL AllReduce less {FAST_ALLREDUCE_SAVING_US:.0f} us per call "
                "(SGLang PCIe-IPC AllReduce: TPOT 21.14 -> 13.62 ms at TP8, REFERENCE §2), "
                f"floor 25%; AllReduce from {base.source}",
            )  # fmt: skip
        return spec_curve(op, n, self.hw, self.link_eff)

    def latency_us(self, op: str, n: int, nbytes: np.ndarray | float) -> np.ndarray:
        return self.get(op, n).latency_us(nbytes)

    def kind(self, op: str, n: int) -> str:
        return self.get(op, n).kind

    def used(self) -> list[CommCurve]:
        return list(self._used.values())


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
            tail_busbw_gbps=_TAIL_BUSBW_GBPS["nvlink" if interconnect == "nvlink" else "pcie"],
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
