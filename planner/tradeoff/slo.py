"""Latency targets in, the best layout out.

Per layout: the highest concurrency of the plan's grid at which both targets hold (TPOT and
TTFT at or under them), and its output tokens/s per GPU there. The answer is the
recommendable layout (compliant with the policy, on measured or fitted collectives) that
serves the most per GPU, with the runner-up; the two are too close to call where their
tokens/s-per-GPU bands overlap.

Targets hold on the mean, or on a per-request percentile (``p90`` / ``p99``) where the
predictions carry them (``LayoutCurve.percentiles``: the simulated benchmark's, issue 55);
where a curve carries none the mean stands in and the answer says so. The tokens/s band follows from the TPOT and TTFT bands through the closed
loop the benchmark runs: each of C clients gets O tokens per request lifetime
TTFT + (O - 1) x TPOT, so the rate scales with the inverse of the lifetime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError
from planner.tradeoff.types import LayoutCurve, LayoutResult, PlanResult

STATS = ("mean", "p90", "p99")
NAN = float("nan")


@dataclass(frozen=True)
class Targets:
    tpot_ms: float
    ttft_ms: float
    stat: str = "mean"  # the statistic asked for: mean, p90 or p99

    def check(self) -> Targets:
        """Itself, or one line naming the flag that is wrong."""
        for flag, value in (("--tpot-ms", self.tpot_ms), ("--ttft-ms", self.ttft_ms)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise PlannerInputError(f"{flag} {value!r}: a target in milliseconds > 0")
        if self.stat not in STATS:
            raise PlannerInputError(f"--slo-stat {self.stat!r}: one of {', '.join(STATS)}")
        return self

    def describe(self, stat: str | None = None) -> str:
        return (f"{stat or self.stat} TPOT <= {self.tpot_ms:g} ms and TTFT <= "
                f"{self.ttft_ms:g} ms")  # fmt: skip


@dataclass(frozen=True)
class LayoutSlo:
    """One layout under the targets; ``max_concurrency`` None: no grid point meets them."""

    layout: str
    recommendable: bool
    compliant: bool
    hypothesis: bool
    max_concurrency: int | None = None
    tok_s_per_gpu: float = NAN
    tok_s_low: float = NAN  # the band: 80% of measured runs within low..high
    tok_s_high: float = NAN
    tpot_ms: float = NAN  # in the statistic the targets were checked on
    ttft_ms: float = NAN
    queues: bool = False  # there not every request is admitted at once (waits for KV room)


@dataclass(frozen=True)
class Miss:
    """Nothing meets the targets: the recommendable layout closest to them, where it is."""

    layout: str
    concurrency: int
    tpot_ms: float
    ttft_ms: float

    def failing(self, t: Targets) -> list[tuple[str, float, float]]:
        """(target, predicted, target value) of each missed target, the worst first."""
        out = [(name, value, goal) for name, value, goal in
               (("TPOT", self.tpot_ms, t.tpot_ms), ("TTFT", self.ttft_ms, t.ttft_ms))
               if value > goal]  # fmt: skip
        return sorted(out, key=lambda x: x[1] / x[2], reverse=True)


@dataclass(frozen=True)
class SloAnswer:
    targets: Targets
    stat: str  # the statistic the targets were checked on (mean where percentiles are missing)
    per_layout: list[LayoutSlo]
    best: LayoutSlo | None
    runner_up: LayoutSlo | None
    miss: Miss | None  # set when best is None and some recommendable layout has a prediction

    @property
    def too_close(self) -> bool:
        """The best and the runner-up overlap within the model's measured error."""
        b, r = self.best, self.runner_up
        return b is not None and r is not None and r.tok_s_high >= b.tok_s_low

    def stat_note(self) -> str:
        if self.stat == self.targets.stat:
            return ""
        return (f"{self.targets.stat} asked: the predictions carry no per-request percentiles, "
                "so the mean stands in")  # fmt: skip

    def sentence(self) -> str:
        """The answer in one sentence (plain text)."""
        t, b = self.targets, self.best
        if b is not None:
            return (f"{b.layout} serves the most within {t.describe(self.stat)}: "
                    f"{b.tok_s_per_gpu:.1f} output tokens/s per GPU at concurrency "
                    f"{b.max_concurrency} (TPOT {b.tpot_ms:.2f} ms, TTFT {b.ttft_ms:.0f} ms)"
                    + (", some requests waiting for KV room" if b.queues else "") + ".")  # fmt: skip
        if self.miss is None:
            return (f"Nothing meets {t.describe(self.stat)}: no compliant layout on measured or "
                    "fitted collectives has a prediction on this host.")  # fmt: skip
        m = self.miss
        fails = [f"{name} {value:.2f} ms against {goal:g} ms (+{value - goal:.2f} ms, "
                 f"{value / goal - 1:+.0%})" for name, value, goal in m.failing(t)]  # fmt: skip
        first, _, rest = fails[0].partition(" ")
        return (f"Nothing meets {t.describe(self.stat)}. Closest: {m.layout} at concurrency "
                f"{m.concurrency}, where {first} fails first: {rest}"
                + "".join(f"; {f} too" for f in fails[1:]) + ".")  # fmt: skip

    def runner_up_sentence(self) -> str:
        b, r = self.best, self.runner_up
        if b is None:
            return ""
        if r is None:
            return "No other recommendable layout meets the targets."
        text = (f"Runner-up: {r.layout}, {r.tok_s_per_gpu:.1f} tokens/s per GPU at concurrency "
                f"{r.max_concurrency} ({r.tok_s_per_gpu / b.tok_s_per_gpu - 1:+.0%})")  # fmt: skip
        band = (f"80% of measured runs within {b.tok_s_low:.1f}-{b.tok_s_high:.1f} and "
                f"{r.tok_s_low:.1f}-{r.tok_s_high:.1f}")  # fmt: skip
        if self.too_close:
            return f"{text}: too close to call ({band}); measure both."
        return f"{text}; {b.layout} wins beyond the model's measured error ({band})."

    def policy_sentence(self) -> str:
        """What the policy costs under these targets: the best blocked layout, if better."""
        blocked = [x for x in self.per_layout if not x.compliant and not x.hypothesis
                   and x.max_concurrency is not None]  # fmt: skip
        if not blocked:
            return ""
        top = max(blocked, key=lambda x: x.tok_s_per_gpu)
        here = self.best.tok_s_per_gpu if self.best is not None else 0.0
        if top.tok_s_per_gpu <= here:
            return (f"Under these targets the policy costs nothing: no blocked layout serves "
                    f"more than {here:.1f} tokens/s per GPU.")  # fmt: skip
        gain = top.tok_s_per_gpu - here
        return (f"{top.layout} (blocked by the policy) would serve {top.tok_s_per_gpu:.1f} "
                f"tokens/s per GPU at concurrency {top.max_concurrency} under the same targets: "
                f"the policy costs {gain:.1f} tokens/s per GPU here.")  # fmt: skip


def latency(cur: LayoutCurve, metric: str, stat: str) -> np.ndarray | None:
    """``tpot_ms`` or ``ttft_ms`` of a curve in ``stat``; None where it does not carry it."""
    if stat == "mean":
        return cur.tpot_ms if metric == "tpot_ms" else cur.ttft_ms
    return cur.percentiles.get(metric, {}).get(stat)


def _stat(curves: list[LayoutCurve], stat: str) -> str:
    """``stat`` when every curve with a prediction carries it, else the mean (one statistic
    for every layout, so their answers compare)."""
    live = [c for c in curves if not c.why_not]
    ok = all(latency(c, m, stat) is not None for c in live for m in ("tpot_ms", "ttft_ms"))
    return stat if ok and live else "mean"


def _one(r: LayoutResult, cur: LayoutCurve, t: Targets, stat: str, gpus: int,
         osl: int) -> LayoutSlo:  # fmt: skip
    flags = {"layout": r.layout.name, "recommendable": r.recommendable,
             "compliant": r.compliant, "hypothesis": r.hypothesis}  # fmt: skip
    if cur.why_not:
        return LayoutSlo(**flags)
    tpot, ttft = latency(cur, "tpot_ms", stat), latency(cur, "ttft_ms", stat)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(tpot) & np.isfinite(ttft) & (tpot <= t.tpot_ms) & (ttft <= t.ttft_ms)
    hits = np.nonzero(ok)[0]
    if not hits.size:
        return LayoutSlo(**flags)
    j = int(hits[-1])
    rate = float(cur.tokens_per_s[j]) / gpus
    life = float(cur.ttft_ms[j]) + (osl - 1) * float(cur.tpot_ms[j])
    fast = float(cur.ttft_low_ms[j]) + (osl - 1) * float(cur.low_ms[j])
    slow = float(cur.ttft_high_ms[j]) + (osl - 1) * float(cur.high_ms[j])
    return LayoutSlo(**flags, max_concurrency=int(cur.concurrency[j]), tok_s_per_gpu=rate,
                     tok_s_low=rate * life / slow, tok_s_high=rate * life / fast,
                     tpot_ms=float(tpot[j]), ttft_ms=float(ttft[j]),
                     queues=not bool(cur.fits[j]))  # fmt: skip


def _closest(res: PlanResult, curves: list[LayoutCurve], t: Targets, stat: str) -> Miss | None:
    """The recommendable layout and grid point nearest the targets (the smallest worst ratio
    of predicted to target)."""
    best: tuple[float, Miss] | None = None
    for r, cur in zip(res.layouts, curves, strict=True):
        if not r.recommendable or cur.why_not:
            continue
        tpot, ttft = latency(cur, "tpot_ms", stat), latency(cur, "ttft_ms", stat)
        worst = np.fmax(tpot / t.tpot_ms, ttft / t.ttft_ms)
        if not np.isfinite(worst).any():
            continue
        j = int(np.nanargmin(worst))
        if best is None or worst[j] < best[0]:
            best = (float(worst[j]), Miss(r.layout.name, int(cur.concurrency[j]),
                                          float(tpot[j]), float(ttft[j])))  # fmt: skip
    return best[1] if best else None


def meet_targets(res: PlanResult, targets: Targets, calibrated: bool = False) -> SloAnswer:
    """Every layout of the plan under ``targets`` (the calibrated view's curves if asked)."""
    t = targets.check()
    curves = [r.view(calibrated) for r in res.layouts]
    stat = _stat(curves, t.stat)
    gpus = res.hardware.gpu_count
    rows = [_one(r, c, t, stat, gpus, res.osl) for r, c in zip(res.layouts, curves, strict=True)]
    ranked = sorted((x for x in rows if x.recommendable and x.max_concurrency is not None),
                    key=lambda x: x.tok_s_per_gpu, reverse=True)  # fmt: skip
    best = ranked[0] if ranked else None
    runner = ranked[1] if len(ranked) > 1 else None
    miss = None if best is not None else _closest(res, curves, t, stat)
    return SloAnswer(t, stat, rows, best, runner, miss)


def _r(x: float, nd: int) -> float | None:
    return round(float(x), nd) if x == x else None


def to_json(ans: SloAnswer) -> dict:
    """The ``slo`` object of ``python -m planner --json``."""
    b = ans.best
    best = None if b is None else {
        "layout": b.layout, "concurrency": b.max_concurrency,
        "output_tok_s_per_gpu": _r(b.tok_s_per_gpu, 2), "tpot_ms": _r(b.tpot_ms, 4),
        "ttft_ms": _r(b.ttft_ms, 2)}  # fmt: skip
    return {"tpot_ms": ans.targets.tpot_ms, "ttft_ms": ans.targets.ttft_ms, "stat": ans.stat,
            "best": best,
            "per_layout": [{"layout": x.layout, "max_concurrency": x.max_concurrency,
                            "output_tok_s_per_gpu": _r(x.tok_s_per_gpu, 2)}
                           for x in ans.per_layout]}  # fmt: skip
