"""A plan as ``python -m planner`` prints it: the answer first (under latency targets: the
layout serving the most per GPU, its runner-up and whether they are too close to call), then
the table with bands, the headline, close calls, hypotheses with the commands that would
measure them, crossovers, the policy, findings."""

from __future__ import annotations

from planner.tradeoff import reference
from planner.tradeoff.recommend import call_at
from planner.tradeoff.report_json import result_commands
from planner.tradeoff.slo import SloAnswer, meet_targets
from planner.tradeoff.types import PlanResult


def _cell(tpot: float, fits: bool) -> str:
    return f"{tpot:>8.2f}" + (" " if fits else "*") if tpot == tpot else f"{'-':>8} "


def _measure_lines(res: PlanResult, names: list[str]) -> list[str]:
    return [f"  {name} [{cmd['engine']}]: {cmd['measure']}"
            for name in names for cmd in result_commands(res, name)]  # fmt: skip


def answer_lines(res: PlanResult, slo: SloAnswer | None) -> list[str]:
    """What the report starts with: the answer under the targets, else the headline."""
    if slo is None:
        head = res.headline
        if head is None:
            return ["Answer: nothing compliant fits on this host at these concurrencies."]
        return [f"Answer: {head.layout}, the lowest TPOT from concurrency {head.start} "
                f"({head.tpot_ms_start:.2f} ms). With latency targets (--tpot-ms T --ttft-ms F) "
                "the planner names the layout serving the most per GPU within them."]  # fmt: skip
    lines = [f"Answer: {slo.sentence()}"]
    if slo.stat_note():
        lines.append(f"  ({slo.stat_note()})")
    if slo.best is not None:
        lines.append(slo.runner_up_sentence())
    if slo.too_close:
        lines += _measure_lines(res, [slo.best.layout, slo.runner_up.layout])
    if res.calibration is not None and res.calibration.applied:
        lines.append("Calibrated to this host's measurements: "
                     + meet_targets(res, slo.targets, calibrated=True).sentence())  # fmt: skip
    width = max(len(x.layout) for x in slo.per_layout) + 2
    lines += ["", "Within the targets".ljust(width) + "max concurrency  tokens/s per GPU"]
    for x in slo.per_layout:
        tag = "" if x.recommendable else "  BLOCKED" if not x.compliant else "  HYPOTHESIS"
        tag += "  (no prediction: see below)" if res.layout(x.layout).curve.why_not else ""
        if x.max_concurrency is None:
            lines.append(x.layout.ljust(width) + f"{'-':>15}  {'-':>16}{tag}")
            continue
        lines.append(x.layout.ljust(width) + f"{x.max_concurrency:>15}  "
                     f"{x.tok_s_per_gpu:>16.1f}{tag}")  # fmt: skip
    policy = slo.policy_sentence()
    return lines + ([policy] if policy else [])


def render_text(res: PlanResult, cs: list[int], preset: bool,
                slo: SloAnswer | None = None) -> str:  # fmt: skip
    hw = res.hardware
    targets = f"; targets {slo.targets.describe(slo.stat)}" if slo is not None else ""
    lines = [*answer_lines(res, slo), "",
             f"{res.model.name} on {hw.gpu_count}x {hw.gpu_model} ({hw.name}), {res.engine}, "
             f"{res.isl} in / {res.osl} out, policy {res.policy.label}{targets}", ""]  # fmt: skip
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
        lines += _measure_lines(res, sorted(n for n in names if n))
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
