"""One collective's latency curve, used only where it holds (issue 57).

The x axis is the payload *per rank* in bytes (planner.cost.comm says what that is per op).
Inside the measured sizes the curve is log-log interpolated between its points. Outside them
it is extended with two terms and says so:

- the curve's own **bandwidth**: the bytes on the wire per second at its largest size, once
  that size is past the latency (its time at least twice its smallest size's); else the
  host's spec bandwidth (the curve never left its latency);
- a **latency**: its smallest size's time less that size's bytes at that bandwidth, when the
  bytes are at most half of it (a small-size run measured the latency); else the host's spec
  latency (a bandwidth run, ``-b 1G``, measured no latency: its 1 GiB time is bytes).

Below the smallest size: min(its time, latency + bytes / bandwidth); beyond the largest:
its time + the extra bytes / bandwidth. So a 1-8 GiB AllReduce curve prices a 524 KB decode
AllReduce at the spec latency plus the measured bandwidth, never at the 1 GiB time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LATENCY_SHARE = 0.5  # the smallest size measures the latency when bytes are at most this share
PAST_LATENCY = 2.0  # the largest size measures the bandwidth when its time is this many x


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor: 2(n-1)/n for AllReduce, (n-1)/n otherwise."""
    n = max(n, 1)
    return 2 * (n - 1) / n if op.startswith("all_reduce") else (n - 1) / n


def wire_factor(op: str, n: int) -> float:
    """Bytes one rank moves over its link per byte of the curve's x axis: nccl-tests' bus
    factor, except all-to-all, whose x axis is one destination's share (sent n - 1 times)."""
    return float(max(n, 1) - 1) if op == "all_to_all" else bus_factor(op, n)


def fmt_bytes(b: float) -> str:
    """``8 GiB``, ``128 MiB`` for whole powers of two (nccl-tests' sizes), else ``524 KB``."""
    b = float(b)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        whole = int(b // size)
        if b >= size and b % size == 0 and whole & (whole - 1) == 0:
            return f"{b / size:.0f} {unit}"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b:.0f} B"


def _span(lo: float, hi: float) -> str:
    """``1-8 GiB`` when both ends share a unit, else ``8 B-16 GiB``."""
    a, b = fmt_bytes(lo), fmt_bytes(hi)
    if a == b:
        return a
    unit_a, unit_b = a.split()[-1], b.split()[-1]
    return f"{a.split()[0]}-{b}" if unit_a == unit_b else f"{a}-{b}"


@dataclass(frozen=True)
class CommCurve:
    """Latency (us) vs bytes per rank for one collective on one world size."""

    op: str
    world_size: int
    bytes: tuple[float, ...]
    us: tuple[float, ...]
    kind: str  # measured | published | derived | spec
    source: str
    # Wire GB/s beyond (and below) the measured sizes when stated (published, spec); None:
    # from the curve's own largest size, else the host's spec bandwidth.
    tail_busbw_gbps: float | None = 30.0
    # Derived curves: latency = max(base - shift_us, floor_frac * base) * scale.
    scale: float = 1.0
    shift_us: float = 0.0
    floor_frac: float = 0.0
    bus_op: str = ""  # derived curves keep their base op's bus factor in the tail
    gpu_model: str = ""  # the GPUs it was measured on ("": the run names none)
    chosen: bool = False  # named by the user (--comm-run): used even when it names no GPU
    # The host's spec sheet, for what the curve did not measure (set by planner.cost.comm).
    spec_latency_us: float = 8.0
    spec_busbw_gbps: float = 30.0
    spec_name: str = "the default link"

    # ---- the two terms outside the measured sizes ----------------------------------------
    def _wire(self, nbytes):
        return np.asarray(nbytes, dtype=float) * wire_factor(self.bus_op or self.op,
                                                             self.world_size)  # fmt: skip

    def bandwidth(self) -> tuple[float, str]:
        """(wire bytes per second, where from) used outside the measured sizes."""
        if self.tail_busbw_gbps:
            return self.tail_busbw_gbps * 1e9, f"{self.tail_busbw_gbps:g} GB/s (stated)"
        if len(self.bytes) > 1 and self.us[-1] >= PAST_LATENCY * self.us[0]:
            bw = float(self._wire(self.bytes[-1])) / (self.us[-1] * 1e-6)
            return bw, f"the measured bandwidth ({bw / 1e9:,.0f} GB/s at {fmt_bytes(self.bytes[-1])})"
        return self.spec_busbw_gbps * 1e9, (f"the spec bandwidth of {self.spec_name} "
                                            f"({self.spec_busbw_gbps:,.0f} GB/s)")  # fmt: skip

    def latency(self) -> tuple[float, str]:
        """(us, where from): the latency below the measured sizes."""
        bw, _ = self.bandwidth()
        moving = float(self._wire(self.bytes[0])) / bw * 1e6
        if moving <= LATENCY_SHARE * self.us[0]:
            return self.us[0] - moving, f"the measured latency ({self.us[0] - moving:.1f} us)"
        return self.spec_latency_us, (f"the spec latency of {self.spec_name} "
                                      f"({self.spec_latency_us:g} us)")  # fmt: skip

    def latency_us(self, nbytes: np.ndarray | float) -> np.ndarray:
        b = np.maximum(np.asarray(nbytes, dtype=float), 1.0)
        xs, ys = np.log(self.bytes), np.log(self.us)
        out = np.exp(np.interp(np.log(b), xs, ys)) if len(xs) > 1 else np.full_like(b, self.us[0])
        lo, hi = self.bytes[0], self.bytes[-1]
        if np.any(b < lo) or np.any(b > hi):
            bw, _ = self.bandwidth()
            alpha, _ = self.latency()
            below = np.minimum(self.us[0], alpha + self._wire(b) / bw * 1e6)
            above = self.us[-1] + self._wire(b - hi) / bw * 1e6
            out = np.where(b < lo, below, np.where(b > hi, above, out))
        if self.shift_us or self.floor_frac:
            out = np.maximum(out - self.shift_us, self.floor_frac * out)
        return out * self.scale

    # ---- words ---------------------------------------------------------------------------
    @property
    def max_bytes(self) -> float:
        return self.bytes[-1]

    @property
    def has_sizes(self) -> bool:
        """A curve of measured (or published) sizes, not an alpha-beta line."""
        return self.kind in ("measured", "published") or (self.kind == "derived"
                                                          and len(self.bytes) > 1)  # fmt: skip

    def coverage(self) -> str:
        """``all_reduce measured 1-8 GiB``."""
        what = {"measured": "measured", "published": "published"}.get(self.kind, "from")
        return f"{self.op} {what} {_span(self.bytes[0], self.bytes[-1])}"

    def explain(self, lo: float, hi: float) -> str:
        """Which of the sizes ``lo``-``hi`` the curve measured and which it extended:
        ``all_reduce measured 1-8 GiB; 524 KB from the spec latency plus the measured
        bandwidth``."""
        if not self.has_sizes:
            return ""
        parts = [self.coverage()]
        first, last = self.bytes[0], self.bytes[-1]
        if lo < first:
            _, lat = self.latency()
            _, bw = self.bandwidth()
            size = _span(lo, hi) if hi < first else f"{fmt_bytes(lo)} up to {fmt_bytes(first)}"
            parts.append(f"{size} from {_words(lat)} plus {_words(bw)}")
        if hi > last:
            _, bw = self.bandwidth()
            size = _span(lo, hi) if lo > last else f"{fmt_bytes(last)} up to {fmt_bytes(hi)}"
            parts.append(f"{size} beyond it: its {fmt_bytes(last)} time plus {_words(bw)}")
        if len(parts) == 1:
            parts.append(f"{_span(lo, hi)} inside it")
        return "; ".join(parts)

    def describe(self) -> str:
        span = (f"{len(self.bytes)} point(s), {_span(self.bytes[0], self.bytes[-1])}"
                if self.kind in ("measured", "published") else
                "derived" if self.kind == "derived" else "spec-sheet alpha-beta")  # fmt: skip
        return f"{self.op} ({self.world_size} GPUs): {self.source} [{span}]"


def _words(text: str) -> str:
    """The phrase without its figure in brackets (the sentence stays short)."""
    return text.split(" (", 1)[0]
