"""Communication cost: latency per collective and world size, and where each curve came from.

The x axis of every curve is the payload *per rank* in bytes: for AllReduce the message
(tokens x hidden x dtype), for all-to-all the bytes one rank sends to each destination
(tokens per rank x hidden x dtype: the write-up's "14,336 B per destination"), for
AllGather / ReduceScatter the gathered total. Inside a curve's measured sizes: log-log
interpolation; outside them its own bandwidth and a latency from its smallest size, else the
host's spec (planner.cost.comm.curve), and the answer says which sizes were extended.

:func:`pick` is the one lookup the planner (CommSet) and the floors (planner.cost.floors)
share: a curve is used only for the GPU model and world size it was measured on; the others
are listed as not used, with why (:meth:`CommSet.not_used`).

Every curve has a kind, in order of trust: ``measured`` (a comm run in the store, on this
host), ``published`` (a published figure for the same GPUs), ``derived`` (another op's curve
under a stated rule) or ``spec`` (alpha-beta from the host's spec sheet: the link latency
and the link bandwidth the serving model's fit assumes). The planner calls a layout a
hypothesis when it rests on a collective the fit never saw that nobody measured here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.cost.comm.curve import CommCurve
from planner.cost.comm.rows import DEFAULT_ALPHA_US
from planner.specs import hardware as hardware_table
from planner.specs.hardware import HardwareSpec

OPS = ("all_reduce", "all_reduce_fast", "all_to_all", "all_gather", "reduce_scatter")
# Collectives the serving model's fit covers (NCCL AllReduce under TP, AllGather +
# ReduceScatter under attention-DP, on spec-sheet figures): their error is in the band. The
# others rest on a derived or spec-sheet curve until measured on the host.
FITTED_OPS = ("all_reduce", "all_gather", "reduce_scatter")


# SGLang's PCIe-IPC AllReduce cut TPOT 21.14 -> 13.62 ms at TP8 (REFERENCE §2): 7.52 ms over
# the 123 AllReduces of a 61-layer step is about 61 us per call.
FAST_ALLREDUCE_SAVING_US = (21.14 - 13.62) * 1000 / 123


def spec_curve(op: str, n: int, hw: HardwareSpec, link_eff: float) -> CommCurve:
    """alpha + bytes on the wire / achieved link bandwidth, from the host's spec sheet."""
    alpha = spec_latency(hw)
    bw = hw.link_gbps * link_eff
    return CommCurve(
        op=op, world_size=n, bytes=(1.0,), us=(alpha,), kind="spec",
        source=f"spec sheet of {hw.name}: {alpha:g} us + bytes over {bw:.0f} GB/s "
        f"({hw.interconnect}, {link_eff:.0%} of {hw.link_gbps:g} GB/s)",
        tail_busbw_gbps=bw,
    )  # fmt: skip


def spec_latency(hw: HardwareSpec) -> float:
    return hw.link_latency_us or DEFAULT_ALPHA_US.get(hw.interconnect, 27.0)


def same_gpu(a: str, b: str) -> bool:
    """Whether two GPU names are one model: the same entry of the known-GPU table (else the
    same words), and one name's words within the other's (``NVIDIA H100 80GB HBM3`` is the
    preset's ``NVIDIA H100``; ``NVIDIA H100 PCIe`` is not ``NVIDIA H100 80GB HBM3``)."""
    ka, kb = hardware_table.known_gpu(a), hardware_table.known_gpu(b)
    if ka is not kb:
        return False
    wa, wb = set(hardware_table.name_words(a)), set(hardware_table.name_words(b))
    return bool(wa and wb) and (wa <= wb or wb <= wa)


def unusable(c: CommCurve, hw: HardwareSpec) -> str:
    """Why a stored curve cannot stand for this host's GPUs ("" when it can)."""
    if c.kind != "measured":
        return ""  # published curves are chosen for the GPU model (published_for)
    if not c.gpu_model:
        return "" if c.chosen else ("its run names no GPU (give it with --comm-run RUN_ID to "
                                    "use it for these GPUs)")  # fmt: skip
    if not same_gpu(c.gpu_model, hw.gpu_model):
        return f"measured on {c.gpu_model}, not this host's {hw.gpu_model}"
    return ""


def bind(c: CommCurve, hw: HardwareSpec, link_eff: float) -> CommCurve:
    """The curve with this host's spec latency and bandwidth for what it did not measure."""
    return replace(c, spec_latency_us=spec_latency(hw), spec_busbw_gbps=hw.link_gbps * link_eff,
                   spec_name=hw.name)  # fmt: skip


def pick(op: str, n: int, curves: list[CommCurve], hw: HardwareSpec,
         link_eff: float) -> CommCurve | None:  # fmt: skip
    """The stored curve of ``op`` over ``n`` GPUs for this host: measured before published,
    on these GPUs, the one reaching the smallest sizes first (decode messages are small);
    None when there is none."""
    fits = [c for c in curves if c.op == op and c.world_size == n
            and c.kind in ("measured", "published") and not unusable(c, hw)]  # fmt: skip
    fits.sort(key=lambda c: (c.kind != "measured", c.bytes[0], c.source))
    return bind(fits[0], hw, link_eff) if fits else None


@dataclass(frozen=True)
class NotUsed:
    """A stored curve an answer did not use, and why."""

    curve: CommCurve
    why: str

    def to_json(self) -> dict[str, object]:
        c = self.curve
        return {"op": c.op, "world_size": c.world_size, "source": c.source,
                "measured": c.coverage(), "gpu_model": c.gpu_model or None, "why": self.why}  # fmt: skip

    def sentence(self) -> str:
        return f"{self.curve.coverage()} over {self.curve.world_size} GPUs ({self.curve.source}): " \
            f"not used: {self.why}"  # fmt: skip


class CommSet:
    """The collectives one plan or prediction uses: each (op, world size) from the best curve
    there is (measured, published, derived, spec), remembered so the plan can list them with
    the message sizes asked of each."""

    def __init__(self, curves: list[CommCurve], hw: HardwareSpec, link_eff: float = 0.7) -> None:
        self.hw, self.link_eff = hw, link_eff
        self._given = [c for c in curves if c.kind in ("measured", "published")]
        self._used: dict[tuple[str, int], CommCurve] = {}
        self._asked: dict[tuple[str, int], tuple[float, float]] = {}

    def _stored(self, op: str, n: int) -> CommCurve | None:
        return pick(op, n, self._given, self.hw, self.link_eff)

    def get(self, op: str, n: int) -> CommCurve:
        key = (op, n)
        if key in self._used:
            return self._used[key]
        curve = self._stored(op, n) or self._derive(op, n)
        self._used[key] = curve
        return curve

    def _derive(self, op: str, n: int) -> CommCurve:
        ar = self._stored("all_reduce", n)
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
        sizes = np.asarray(nbytes, dtype=float)
        if sizes.size:
            lo, hi = self._asked.get((op, n), (np.inf, 0.0))
            self._asked[(op, n)] = (min(lo, float(sizes.min())), max(hi, float(sizes.max())))
        return self.get(op, n).latency_us(nbytes)

    def kind(self, op: str, n: int) -> str:
        return self.get(op, n).kind

    def used(self) -> list[CommCurve]:
        return list(self._used.values())

    def asked(self, op: str, n: int) -> tuple[float, float] | None:
        """The smallest and largest message asked of (op, n), if any was."""
        return self._asked.get((op, n))

    def explain(self, op: str, n: int) -> str:
        """Which of the sizes asked of (op, n) its curve measured and which it extended
        ("" for a spec-sheet line, or nothing asked)."""
        asked = self.asked(op, n)
        return self.get(op, n).explain(*asked) if asked else ""

    def not_used(self) -> list[NotUsed]:
        """Every stored curve the answer did not use, with why."""
        taken = {c.source for c in self._used.values()}
        out = []
        for c in self._given:
            why = unusable(c, self.hw)
            if not why and any(c.source in t for t in taken):  # derived ones name their base
                continue
            if not why and (c.op, c.world_size) in self._used:
                why = (f"the {c.op} over {c.world_size} GPUs came from "
                       f"{self._used[(c.op, c.world_size)].source}")  # fmt: skip
            elif not why:
                spans = sorted({k for op, k in self._used if op == c.op})
                why = (f"the {c.op} here spans {' and '.join(map(str, spans))} GPUs, not "
                       f"{c.world_size}" if spans else f"nothing here runs {c.op}")  # fmt: skip
            out.append(NotUsed(c, why))
        return out
