"""Physical floors of a step's parts: the least time the hardware allows, no fitted efficiency.

The ops are the serving model's own (planner.cost.step_ops.decode_ops for compute,
planner.cost.step_comm.messages for collectives): one model of bytes and FLOPs.

- A compute op's floor is max(bytes / spec memory bandwidth, FLOPs / spec dense tensor peak
  of its format), both from the host's spec sheet (planner.specs.hardware); a trace
  category's floor is the sum over the ops filed under it (each kernel needs at least its
  own floor, also when kernels overlap: concurrent kernels share the same bandwidth).
- A collective's floor is its calls per step (as the trace counts them) x the latency of one
  call at its message size on the host's stored comm curve (measured, else published for
  the same GPUs), else the spec sheet's link latency + bytes on the wire over the full link
  bandwidth. AllReduce takes the faster of the NCCL and fast (custom / PCIe-IPC) curves.
- Every category with kernels also has a launch floor: kernels per step x
  ``KERNEL_FLOOR_US``; it is the only floor of the categories the model has no bytes for
  (norms, elementwise, casts, copies, other, other collectives).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.comm import CommCurve, pick, spec_curve
from planner.cost.step_comm import Message, messages
from planner.cost.step_ops import StepOp, StepShape, decode_ops, peak
from planner.cost.types import ServeLayout, Workload
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec
from store.trace_vocab import CATEGORIES, COMM

# The least a kernel lasts on the GPU's timeline: its blocks are dispatched, run one wave
# and drain (an assumption, not fitted; the shortest kernels of the project's real MI300X
# traces last 1.8-2.5 us, tests/fixtures/traces/tracelens).
KERNEL_FLOOR_US = 1.0
LAUNCH_ONLY = {
    "norm": "norms", "elementwise": "elementwise kernels", "cast_quant": "casts and quantization",
    "memory": "copies, fills and the embedding lookup", "other": "other kernels",
    "other_comm": "other collectives (send / recv, broadcast)",
}  # fmt: skip
_ALLREDUCE_OPS = ("all_reduce", "all_reduce_fast")
CURVE_OP = {"allreduce": "all_reduce", "all_to_all": "all_to_all", "allgather": "all_gather",
            "reduce_scatter": "reduce_scatter"}  # trace category -> planner.cost.comm op


@dataclass(frozen=True)
class Floor:
    """A category's floor per step (None: no kernels of it in the step) and how it was had."""

    us: float | None
    assumption: str


def _num(v) -> float:
    return float(np.asarray(v, dtype=float).reshape(-1)[0])


def _size(b: float, unit: str = "B") -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {prefix}{unit}"
    return f"{b:.0f} {unit}"


def op_floor(op: StepOp, hw: HardwareSpec, activations: str = "") -> tuple[float, str]:
    """(microseconds, words) of one op: bytes over spec bandwidth or FLOPs over spec peak."""
    nbytes, flops = _num(op.nbytes), _num(op.flops)
    bw = hw.mem_bandwidth_gbps * 1e9
    pk = peak(op.family, hw, activations)
    t_bytes, t_flops = nbytes / bw * 1e6, flops / pk * 1e6
    text = f"{op.what}: {_size(nbytes)} / {hw.mem_bandwidth_gbps:,.0f} GB/s = {t_bytes:.1f} us"
    if flops:
        text += (f", {_size(flops, 'FLOP')} / {pk / 1e12:,.0f} TFLOPS ({_peak_name(pk, hw)} peak"
                 f"{'' if op.family == 'bf16' else f', {op.family} weights'}) = "
                 f"{t_flops:.1f} us")  # fmt: skip
    return max(t_bytes, t_flops), text


def _peak_name(pk: float, hw: HardwareSpec) -> str:
    return "FP4" if pk == hw.fp4_tflops * 1e12 else "FP8" if pk == hw.fp8_tflops * 1e12 \
        else "BF16"  # fmt: skip


def comm_curve(op: str, n: int, curves: list[CommCurve], hw: HardwareSpec) -> list[CommCurve]:
    """The curves a collective's floor may use: the host's stored one for these GPUs and this
    world size (planner.cost.comm.pick, the planner's own lookup, at the full link bandwidth
    where the curve measured none); AllReduce both its NCCL and fast ones; else the spec
    sheet at the full link bandwidth."""
    ops = _ALLREDUCE_OPS if op in _ALLREDUCE_OPS else (op,)
    found = [c for o in ops if (c := pick(o, n, curves, hw, 1.0)) is not None]
    measured = [c for c in found if c.kind == "measured"]
    return measured or found or [spec_curve(ops[0], n, hw, 1.0)]


def collective_floor(category: str, calls: float, msgs: list[Message], curves: list[CommCurve],
                     hw: HardwareSpec, world: int) -> tuple[float, str]:  # fmt: skip
    """``calls`` of one collective category at the fastest of its messages and curves."""
    options = []
    for msg in msgs:
        for c in comm_curve(msg.op, msg.world, curves, hw):
            options.append((_num(c.latency_us(msg.nbytes)), _num(msg.nbytes), c))
    size_note = ""
    if not options:  # a collective the layout does not predict: its latency floor
        for c in comm_curve(CURVE_OP[category], max(world, 2), curves, hw):
            options.append((_num(c.latency_us(1.0)), 1.0, c))
        size_note = " (the layout predicts no such collective: its latency at 1 B)"
    lat, nbytes, curve = min(options, key=lambda o: o[0])
    sizes = curve.explain(nbytes, nbytes)
    return calls * lat, (f"{calls:.0f} calls x {lat:.1f} us at {_size(nbytes)}{size_note} "
                         f"[{curve.source}{': ' + sizes if sizes else ''}]")  # fmt: skip


def step_floors(m: ModelSpec | None, hw: HardwareSpec | None, lay: ServeLayout, w: Workload,
                shape: StepShape | None, calls: dict[str, float],
                curves: list[CommCurve]) -> dict[str, Floor]:  # fmt: skip
    """Every category with kernels in the step (``calls`` per category): its floor.

    Without a model or a host only the launch floors are known; without a shape the caller
    passes the least one (one sequence, no context)."""
    parts: dict[str, list[tuple[float, str]]] = {}
    if m is not None and hw is not None and shape is not None:
        for op in decode_ops(m, hw, lay, w, shape):
            parts.setdefault(op.category, []).append(op_floor(op, hw, w.activations))
        by_cat: dict[str, list[Message]] = {}
        for msg in messages(m, lay, w, shape.tokens):
            by_cat.setdefault(msg.category, []).append(msg)
        for cat in COMM:
            if cat != "other_comm" and calls.get(cat, 0) > 0:
                parts[cat] = [collective_floor(cat, calls[cat], by_cat.get(cat, []), curves,
                                               hw, lay.gpus)]  # fmt: skip
    out: dict[str, Floor] = {}
    for cat in CATEGORIES:
        n = calls.get(cat, 0.0)
        if n <= 0:
            continue
        launch = n * KERNEL_FLOOR_US
        launch_text = (f"{n:g} kernel{'' if n == 1 else 's'} x {KERNEL_FLOOR_US:g} us launch "
                       f"floor = {launch:.1f} us")  # fmt: skip
        own = parts.get(cat)
        if not own:
            what = LAUNCH_ONLY.get(cat, "no bytes model for this category without the model "
                                        "and the host")  # fmt: skip
            out[cat] = Floor(launch, f"{what}: {launch_text}")
            continue
        total = sum(us for us, _ in own)
        words = "; ".join(t for _, t in own)
        if launch > total:
            out[cat] = Floor(launch, f"{launch_text} (above the bytes / FLOPs floor, "
                                     f"{total:.1f} us: {words})")  # fmt: skip
        else:
            out[cat] = Floor(total, words)
    return out
