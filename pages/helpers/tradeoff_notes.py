"""The Tradeoff page's tabs that are words: the recommendation at one concurrency and its
close call, hypotheses, what the policy costs, the commands that measure the answer, and the
calibration's own check. Formats a PlanResult and the targets' answer; computes nothing
beyond display."""

from __future__ import annotations

import numpy as np
import streamlit as st

from pages.helpers.tradeoff_answer import HYPOTHESIS, plain
from planner.api import PlanResult, SloAnswer, call_at, result_commands, sglang_only_lines


def blocked_lines(res: PlanResult, calibrated: bool) -> list[str]:
    curves = [r.view(calibrated) for r in res.layouts]
    good = np.vstack([np.where(c.fits & r.recommendable, c.tpot_ms, np.inf)
                      for c, r in zip(curves, res.layouts, strict=True)]).min(axis=0)  # fmt: skip
    out = []
    for r, cur in zip(res.layouts, curves, strict=True):
        if r.compliant:
            continue
        rules = "; ".join(f"`{v.rule_id}` ({plain(v.sentence)})" for v in r.violations)
        gain = np.where(cur.fits & np.isfinite(good), good - cur.tpot_ms, -np.inf)
        j = int(np.argmax(gain))
        if gain[j] > 0:
            what = (f"it would gain {gain[j]:.2f} ms TPOT at concurrency "
                    f"{int(cur.concurrency[j])}: the policy costs {gain[j]:.2f} ms there")  # fmt: skip
        else:
            what = "it is never faster than the best recommended layout here"
        out.append(f"**{r.layout.name}** breaks {rules}; {what}.")
    return out


def _commands(res: PlanResult, names: list[str]) -> list[str]:
    out = []
    for name in names:
        for c in result_commands(res, name):
            out.append(f"  - {name} on {c['engine']}: `{c['launch']}`, measured by "
                       f"`{c['measure']}`")  # fmt: skip
    return out


def recommendation(res: PlanResult, calibrated: bool, at: int) -> None:
    ranges = res.recommended_calibrated if calibrated else res.recommended
    st.subheader("Recommended (compliant, fits, on measured or fitted collectives)")
    if not ranges:
        st.warning("No compliant layout on measured collectives fits at these concurrencies.")
    else:
        head = ranges[0]
        st.markdown(f"**Headline: {head.layout}** from concurrency {head.start} "
                    f"(TPOT {head.tpot_ms_start:.2f} ms)")  # fmt: skip
        st.markdown("\n".join(
            f"- concurrency {x.start}-{x.end}: **{x.layout}** "
            f"(TPOT {x.tpot_ms_start:.2f}-{x.tpot_ms_end:.2f} ms)" for x in ranges))  # fmt: skip
    call = call_at(res, at, calibrated)
    if call.layout and call.too_close:
        st.warning(
            f"At concurrency {at}: too close to call - {call.layout} "
            f"({call.tpot_ms:.2f} ms; 80% of measured runs {call.tpot_ms_low:.2f}-"
            f"{call.tpot_ms_high:.2f}) and "
            f"{', '.join(call.too_close)} overlap within the model's measured error. Measure "
            "both:\n" + "\n".join(_commands(res, [call.layout, *call.too_close])))  # fmt: skip
    elif call.layout:
        st.success(f"At concurrency {at}: {call.layout} ({call.tpot_ms:.2f} ms; 80% of "
                   f"measured runs {call.tpot_ms_low:.2f}-{call.tpot_ms_high:.2f}) beats every other "
                   "recommendable layout beyond the model's measured error.")  # fmt: skip


def hypotheses(res: PlanResult, calibrated: bool, at: int) -> None:
    hyps = [r for r in res.layouts if r.compliant and r.hypothesis]
    if not hyps:
        st.caption("No layout rests on a collective nobody measured here.")
    for r in hyps:
        cur = r.view(calibrated)
        j = cur.at(at)
        ops = ", ".join(f"{c.op} on {c.world_size} GPUs ({c.kind}: {plain(c.source)})"
                        for c in r.unmeasured)  # fmt: skip
        tpot = (f"{cur.tpot_ms[j]:.2f} ms at concurrency {at}"
                if np.isfinite(cur.tpot_ms[j]) else "no prediction")  # fmt: skip
        st.markdown(f"- **{r.layout.name}** [{HYPOTHESIS}]: {tpot}; rests on {ops}. "
                    "Measure it: " + "; ".join(f"`{m}`" for m in r.measure))  # fmt: skip


def calibration_check(res: PlanResult, detail: bool) -> None:
    """The calibration's own check (held-back points before -> after), and in the calibrated
    view what the measurements pinned and its notes."""
    cal = res.calibration
    (st.success if cal.applied else st.warning)(f"Calibration: {plain(cal.sentence())}")
    if detail:  # the measurements' sources carry stored labels: text, not markup
        lines = [f"- **{term}**: {plain(status)}" for term, status in cal.pinned.items()]
        lines += [f"- {plain(n)}" for n in cal.notes]
        lines.append("- factors: " + ", ".join(f"{k} x{v:.2f}" for k, v in cal.factors.items()))
        if cal.band is not None:
            lines.append(f"- band: {cal.band.describe()}")
        st.markdown("\n".join(lines))


def policy(res: PlanResult, ans: SloAnswer, calibrated: bool) -> None:
    st.subheader("Blocked by the policy")
    st.caption(f"Policy {plain(res.policy.label)}: these layouts are never recommended.")
    sentence = ans.policy_sentence()
    if sentence:
        st.markdown(plain(sentence))
    blocked = blocked_lines(res, calibrated)
    st.markdown("\n".join(f"- {line}" for line in blocked) or "No layout here breaks it.")


def commands(res: PlanResult, ans: SloAnswer) -> None:
    """How to measure the answer (both layouts when too close to call), the hypotheses and
    the layouts only SGLang runs."""
    names = [x.layout for x in (ans.best, ans.runner_up) if x is not None]
    if ans.best is not None:
        st.markdown(("Too close to call: measure both." if ans.too_close else
                     "Measure the answer (and its runner-up) on your host:") + "\n"
                    + "\n".join(_commands(res, names)))  # fmt: skip
    hyps = [r for r in res.layouts if r.compliant and r.hypothesis]
    if hyps:
        st.markdown("Hypotheses (an unmeasured collective):\n" + "\n".join(
            f"  - {r.layout.name}: " + "; ".join(f"`{m}`" for m in r.measure) for r in hyps))
    for line in sglang_only_lines(res.layouts):
        st.caption(line)
