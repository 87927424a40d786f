"""The reference case as data: the profiling write-up's published figures (REFERENCE §1).

Preset ``reference-kimi-k25-rtxpro6000``: Kimi-K2.5 INT4, vLLM, 8x RTX PRO 6000 PCIe. Every
figure here is *published*, labelled so, and never mixed with a measured run: the plan that
uses it gets only these curves and these measurements. Its calibrated view follows the rule
of planner.cost.calibrate: the profiled step (21.7 ms, AllReduce 11.17 ms in 127 calls) gives
proportions and calls, the service's TPOT without the profiler (about 12 ms) gives time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.bands import outside_fit
from planner.cost.calibrate import Measured, TraceStep
from planner.cost.comm import PUBLISHED as PUBLISHED_COMM
from planner.cost.comm import CommCurve, CommSet
from planner.cost.floors import comm_curve
from planner.cost.params import FITTED
from planner.cost.step_comm import messages
from planner.cost.types import ServeLayout, Workload
from planner.specs import hardware, models
from planner.tradeoff.types import PlanResult

NAME = "reference-kimi-k25-rtxpro6000"
MODEL, HOST = "kimi-k2.5", "rtx-pro-6000-pcie-8x"
_SRC = "published: Kimi-K2.5 TP=8 profiling write-up (REFERENCE §1)"
ONE_TOKEN_BYTES = 7168 * 2  # 14,336 B: one token's bf16 hidden state


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    value: float
    unit: str


FIGURES: tuple[Figure, ...] = (
    Figure("profiled_step_ms", "profiled decode step (torch.profiler on)", 21.7, "ms"),
    Figure("allreduce_ms", "AllReduce time per profiled step", 11.17, "ms"),
    Figure("allreduce_share", "AllReduce share of the profiled step", 0.515, ""),
    Figure("allreduce_calls", "NCCL AllReduce calls per step", 127, ""),
    Figure("allreduce_us", "NCCL AllReduce per call (1 token, 14,336 B)", 78, "us"),
    Figure("custom_allreduce_ms", "custom vllm::all_reduce path per step", 1.16, "ms"),
    Figure("tpot_ms", "TPOT of the service (no profiler)", 12.0, "ms"),
    Figure("moe_allreduce_ms", "MoE AllReduce EP would remove (60 x 78 us)", 4.68, "ms"),
    Figure("ep_best_tpot_ms", "claimed best case with EP", 8.0, "ms"),
    Figure("a2a_1tok_us_lo", "All-to-All, 1 token/GPU (low)", 19, "us"),
    Figure("a2a_1tok_us_hi", "All-to-All, 1 token/GPU (high)", 25, "us"),
    Figure("a2a_16tok_us", "All-to-All, 16 tokens/GPU (PCIe latency cliff)", 1007, "us"),
    Figure("ep_saving_ms_lo", "write-up verdict: EP saves per step (low)", 3.0, "ms"),
    Figure("ep_saving_ms_hi", "write-up verdict: EP saves per step (high)", 3.5, "ms"),
)
PUBLISHED = {f.key: f.value for f in FIGURES}


def comm_curves() -> list[CommCurve]:
    """Published collective latencies of this GPU set, as curves.

    The service runs NCCL AllReduce under CUDA graphs at AIConfigurator's published latency
    for 8x RTX PRO 6000 (REFERENCE §5: 26.7-27 us at 8-16 KB); the write-up's ~78-88 us per
    call were timed inside the profiled step (torch.profiler on), so they enter through the
    calibration, not the service curve. The all-to-all is the write-up's own figure.
    """
    a2a_mid = (PUBLISHED["a2a_1tok_us_lo"] + PUBLISHED["a2a_1tok_us_hi"]) / 2
    ar = next(c for c in PUBLISHED_COMM[HOST] if c.op == "all_reduce")
    return [
        ar,
        CommCurve("all_to_all", 8, (float(ONE_TOKEN_BYTES), 16.0 * ONE_TOKEN_BYTES),
                  (a2a_mid, PUBLISHED["a2a_16tok_us"]), "published",
                  f"{_SRC}: 19-25 us (mid {a2a_mid:g}) at 1 token/GPU, 1007 us at 16 tokens/GPU"),
    ]  # fmt: skip


def plan_kwargs() -> dict:
    """Everything ``plan`` needs for the reference case, and nothing measured or mixed in."""
    return {"comm_curves": comm_curves(), "measured": measured(), "traces": traces(),
            "fill_published": False}  # fmt: skip


TP8 = ServeLayout(8, moe_tp=8)
# The write-up gives no benchmark lengths for its service TPOT; at one client the decode step
# barely depends on them (one prompt token per step at 1024 / 1024).
SERVICE_ISL = SERVICE_OSL = 1024


def measured() -> list[Measured]:
    """The service's TPOT at one client (profiler off): the calibration's time."""
    return [Measured(TP8, SERVICE_ISL, SERVICE_OSL, 1, PUBLISHED["tpot_ms"], "vllm",
                     source=f"{_SRC}: service TPOT about 12 ms at concurrency 1")]  # fmt: skip


def traces() -> list[TraceStep]:
    """The published profiled step: proportions and calls, never time (profiler on, eager
    collectives that include waiting for the slowest rank). The write-up gives no per-rank
    durations, so the transfer per call is the collective curve's."""
    return [TraceStep(TP8, 1, PUBLISHED["profiled_step_ms"], PUBLISHED["allreduce_ms"],
                      PUBLISHED["allreduce_calls"],
                      f"{_SRC}: profiled step 21.7 ms, AllReduce 11.17 ms in 127 calls")]  # fmt: skip


@dataclass(frozen=True)
class AllReduceFloor:
    """The published step's AllReduce against its floor: ``calls`` x the latency of one call
    at its message size on the host's curve (planner.cost.floors, the trace floors' rule)."""

    calls: int
    message_bytes: float
    per_call_us: float
    measured_ms: float
    source: str

    @property
    def floor_ms(self) -> float:
        return self.calls * self.per_call_us / 1e3

    @property
    def headroom_ms(self) -> float:
        """At most this much of the published AllReduce time is above the floor."""
        return max(self.measured_ms - self.floor_ms, 0.0)

    def sentence(self) -> str:
        return (f"{self.calls} calls x {self.per_call_us:.1f} us at {self.message_bytes:,.0f} B = "
                f"{self.floor_ms:.2f} ms: at most {self.headroom_ms:.2f} ms "
                f"({self.headroom_ms / self.measured_ms:.0%}) of the published "
                f"{self.measured_ms:g} ms is above the PCIe latency floor [{self.source}]")  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        return {"calls": self.calls, "message_bytes": self.message_bytes,
                "per_call_us": round(self.per_call_us, 3), "floor_ms": round(self.floor_ms, 3),
                "measured_ms": self.measured_ms, "headroom_ms": round(self.headroom_ms, 3),
                "curve": self.source}  # fmt: skip


def allreduce_floor() -> AllReduceFloor:
    """The 127 AllReduces of the published 1-token step at the PCIe latency floor: one
    token's hidden state (14,336 B) per call, on AIConfigurator's published NCCL curve for
    these GPUs (the curve the trace floors would take for this host)."""
    model, hw = models.preset(MODEL), hardware.preset(HOST)
    msg = next(x for x in messages(model, ServeLayout(tp=8), Workload(1, 2), np.array([1.0]))
               if x.category == "allreduce")  # fmt: skip
    nbytes = float(msg.nbytes[0])
    curve = min(comm_curve(msg.op, msg.world, comm_curves(), hw),
                key=lambda c: float(c.latency_us(nbytes)))  # fmt: skip
    return AllReduceFloor(int(PUBLISHED["allreduce_calls"]), nbytes,
                          float(curve.latency_us(nbytes)), PUBLISHED["allreduce_ms"],
                          curve.source)  # fmt: skip


def _find(res: PlanResult, kind: str, **attrs: object):
    for r in res.layouts:
        if r.layout.kind == kind and all(getattr(r.layout, k) == v for k, v in attrs.items()):
            return r
    return None


def checks(res: PlanResult) -> list[dict[str, object]]:
    """Published figure vs what the model gives, for the reference preset's plan."""
    tp = _find(res, "tp")
    est = _find(res, "tp_attn_ep_moe")
    fl = allreduce_floor()
    out: list[dict[str, object]] = [{
        "figure": "AllReduce above the PCIe latency floor (the room a faster AllReduce has)",
        "published": f"{fl.measured_ms:g} ms in {fl.calls} calls",
        "model": f"floor {fl.sentence()}"}]  # fmt: skip
    if tp is None or tp.curve.why_not:
        return out
    i1 = tp.curve.at(1)
    lo, hi = tp.curve.low_ms[i1], tp.curve.high_ms[i1]
    model = f"{tp.curve.tpot_ms[i1]:.2f} ms (band {lo:.2f}-{hi:.2f}"
    gaps = outside_fit(res.hardware)
    if not lo <= PUBLISHED["tpot_ms"] <= hi and gaps:  # say why the fit's band misses it
        model += (f"; {PUBLISHED['tpot_ms']:.0f} ms lies outside it: this host is outside the "
                  f"fit's data ({', '.join(g.what for g in gaps)})")  # fmt: skip
    model += ")"
    if tp.calibrated is not None:
        model += f"; calibrated {tp.calibrated.tpot_ms[i1]:.2f} ms"
    out.append({"figure": "TPOT, TP=8, concurrency 1 (service)", "published": "about 12 ms",
                "model": model})  # fmt: skip
    out.append({"figure": "AllReduce calls per step", "published": "127",
                "model": f"{tp.curve.allreduce_calls} (61 x 2 + 1, vLLM structure)"})  # fmt: skip
    view = tp.view(True)
    ar = view.terms["allreduce"][i1]
    out.append({"figure": "AllReduce per step", "published": "11.17 ms of the 21.7 ms "
                "profiled step (88 us a call, waiting for the slowest rank included)",
                "model": f"{ar:.2f} ms of {view.tpot_ms[i1]:.2f} ms ({ar / view.tpot_ms[i1]:.0%}, "
                f"{ar / tp.curve.allreduce_calls * 1e3:.0f} us a call): what the service "
                "pays"})  # fmt: skip
    if est is not None and not est.curve.why_not:
        # The write-up's EP figures were timed in the profiled step; the model's are what the
        # service pays (the calibrated view when there is one).
        tpv, estv = tp.view(True), est.view(True)
        saved = tpv.terms["allreduce"][i1] - estv.terms["allreduce"][i1]
        a2a = estv.terms["all_to_all"][i1]
        imb = estv.terms["expert_imbalance"][i1]
        ops = 2 * res.model.num_moe_layers
        out.append({"figure": "MoE AllReduce removed at 1 token/GPU", "published":
                    "4.68 ms (60 x 78 us, timed in the profiled step)",
                    "model": f"{saved:.2f} ms (the service's transfer)"})  # fmt: skip
        out.append({"figure": "all-to-all added at 1 token/GPU (dispatch + combine)",
                    "published": "19-25 us per op",
                    "model": f"{a2a:.2f} ms ({a2a / ops * 1e3:.0f} us per op)"})  # fmt: skip
        out.append({"figure": "net saving at 1 token/GPU", "published": "about 3-3.5 ms",
                    "model": f"{saved - a2a:.2f} ms communication; {saved - a2a - imb:.2f} ms "
                    f"after the busiest EP rank's extra expert reads ({imb:.2f} ms)"})  # fmt: skip
        out.append(ep_at_16(res))
    return out


def ep_at_16(res: PlanResult) -> dict[str, str]:
    """The write-up's 16 tokens per GPU, one decode step of 128 sequences priced on the
    published curves: EP adds each MoE layer's dispatch and combine of 16 tokens per GPU
    and removes its AllReduce of 128 (at 1,024 + 1,024 tokens 128 clients do not fit the KV
    cache, so the serving curves there queue for it on either layout)."""
    n, h = res.hardware.gpu_count, res.model.hidden
    comm = CommSet(comm_curves(), res.hardware, FITTED.link_eff)
    a2a_us = float(comm.latency_us("all_to_all", n, 16 * h * 2.0))  # BF16 dispatch, combine
    ar_us = float(comm.latency_us("all_reduce", n, 16 * n * h * 2.0))
    d_ms = res.model.num_moe_layers * (2 * a2a_us - ar_us) / 1e3
    return {"figure": "EP at 16 tokens/GPU", "published": "loses (1007 us per op)",
            "model": f"{'loses' if d_ms > 0 else 'wins'} by {abs(d_ms):.1f} ms a decode step "
            f"({a2a_us:.0f} us per all-to-all, {ar_us:.0f} us per AllReduce removed)"}  # fmt: skip
