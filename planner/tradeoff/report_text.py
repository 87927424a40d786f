"""A plan as ``python -m planner`` prints it: the table with bands, the headline, close calls,
hypotheses with the commands that would measure them, crossovers, the policy, findings."""

from __future__ import annotations

from planner.tradeoff import reference
from planner.tradeoff.recommend import call_at
from planner.tradeoff.report_json import result_commands
from planner.tradeoff.types import PlanResult


def _cell(tpot: float, fits: bool) -> str:
    return f"{tpot:>8.2f}" + (" " if fits else "*") if tpot == tpot else f"{'-':>8} "


def render_text(res: PlanResult, cs: list[int], preset: bool) -> str:
    hw = res.hardware
    lines = [f"{res.model.name} on {hw.gpu_count}x {hw.gpu_model} ({hw.name}), {res.engine}, "
             f"{res.isl} in / {res.osl} out, policy {res.policy.label}", ""]  # fmt: skip
    width = max(len(r.layout.name) for r in res.layouts) + 2
    lines.append("TPOT ms by concurrency".ljust(width) + "".join(f"{c:>9}" for c in cs))
    for r in res.layouts:
        cur = r.curve
        cells = "".join(_cell(float(cur.tpot_ms[cur.at(c)]), bool(cur.fits[cur.at(c)]))
                        for c in cs)  # fmt: skip
        tag = "" if r.compliant else "  BLOCKED: " + ", ".join(v.rule_id for v in r.violations)
        tag += "  HYPOTHESIS" if r.compliant and r.hypothesis else ""
        tag += f"  ({cur.why_not})" if cur.why_not else ""
        lines.append(r.layout.name.ljust(width) + cells + tag)
    lines += ["(* not every request admitted at once: the KV cache is full)", ""]
    head = res.headline
    lines.append("Recommended (compliant, fits, on measured or fitted collectives):")
    if head is not None:
        lines.append(f"  headline: {head.layout} (TPOT {head.tpot_ms_start:.2f} ms at "
                     f"concurrency {head.start})")  # fmt: skip
    lines += [f"  concurrency {x.start}-{x.end}: {x.layout}" for x in res.recommended] or [
        "  nothing compliant fits"]  # fmt: skip
    lines += ["", "At each concurrency (TPOT ms, band: 80% of measured runs within):"]
    for c in cs:
        call = call_at(res, c)
        if call.layout is None:
            lines.append(f"  c={c}: nothing recommendable fits")
            continue
        line = (f"  c={c}: {call.layout} {call.tpot_ms:.2f} "
                f"[{call.tpot_ms_low:.2f}-{call.tpot_ms_high:.2f}]")  # fmt: skip
        if call.too_close:
            line += f" - too close to call with {', '.join(call.too_close)}"
        lines.append(line)
    close = {n for c in cs for n in (call_at(res, c).too_close or ())}
    if close:
        lines += ["", "Too close to call: measure both (python -m collectors ...-bench):"]
        names = {call_at(res, c).layout for c in cs if call_at(res, c).too_close} | close
        for name in sorted(n for n in names if n):
            for cmd in result_commands(res, name):
                lines.append(f"  {name} [{cmd['engine']}]: {cmd['measure']}")
    hyps = [r for r in res.layouts if r.compliant and r.hypothesis]
    if hyps:
        lines += ["", "Hypotheses (an unmeasured collective; never the headline until measured):"]
        for r in hyps:
            ops = ", ".join(f"{c.op} ({c.kind})" for c in r.unmeasured)
            lines.append(f"  {r.layout.name}: rests on {ops}; measure: {'; '.join(r.measure)}")
    if res.crossovers:
        lines += ["", "Crossovers:"] + [f"  {x.sentence()}" for x in res.crossovers[:12]]
    costs = [x for x in res.policy_costs if x.concurrency in cs]
    lines += ["", "Policy:"] + ([f"  {x.sentence()}" for x in costs] or [
        "  costs nothing in TPOT at these concurrencies (where both fit)"])  # fmt: skip
    if res.findings:
        lines += ["", "Findings:"] + [f"  {f}" for f in res.findings]
    if res.calibration is not None:
        lines += ["", *calibration_lines(res, cs)]
    if preset:
        lines += ["", "Published figure vs model (published figures, not measured runs):"]
        lines += [f"  {c['figure']}: published {c['published']}; model {c['model']}"
                  for c in reference.checks(res)]  # fmt: skip
    lines += ["", "Assumptions:"] + [f"  {a.what}: {a.value} [{a.source}]" for a in res.assumptions]
    return "\n".join(lines)


def calibration_lines(res: PlanResult, cs: list[int]) -> list[str]:
    """The calibrated view: its check, what the measurements pinned, and each concurrency's
    call with the band (the held-back error when there is one)."""
    cal = res.calibration
    out = [f"Calibrated to this host's measurements: {cal.sentence()}"]
    out += [f"  {term}: {status}" for term, status in cal.pinned.items()]
    out += [f"  note: {n}" for n in cal.notes]
    out.append("  factors: " + ", ".join(f"{k} x{v:.2f}" for k, v in cal.factors.items()))
    if cal.band is not None:
        out.append(f"  band: {cal.band.describe()}")
    for c in cs:
        call = call_at(res, c, True)
        if call.layout is not None:
            out.append(f"  c={c}: {call.layout} {call.tpot_ms:.2f} "
                       f"[{call.tpot_ms_low:.2f}-{call.tpot_ms_high:.2f}]")  # fmt: skip
    return out
