"""``python -m planner``: the tradeoff calculator on the command line (same numbers as the page).

    python -m planner --preset reference-kimi-k25-rtxpro6000 [--json]
    python -m planner --model CONFIG.json|PRESET --host PRESET|HOST_FILE [--json]
    python -m planner --model CONFIG.json|PRESET --host-from-store HOST [--store S] [--json]

Exit codes: 0 ok, 1 bad input (one line on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from planner import hardware, hosts, models, reference
from planner.api import PlanResult, plan
from planner.costmodel import Assumptions
from planner.errors import PlannerInputError
from planner.layouts import default_layouts, select
from planner.policy import PolicyError, load_policy
from planner.serving_layouts import serving_curves, serving_json


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m planner",
        description="Which parallel layout gives the best TPOT and throughput on this host, "
        "for this model, at full precision - and what the precision policy costs. "
        "`python -m planner lint FILE` checks a launch command or unit file instead.",
        epilog="exit codes: 0 ok, 1 bad input, 2 usage",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--preset", choices=[reference.NAME],
                     help="a published case (model, host and its published figures)")  # fmt: skip
    src.add_argument("--model", help="config.json path or model preset: "
                     + ", ".join(models.MODEL_PRESETS))  # fmt: skip
    hosts.add_arguments(p)
    p.add_argument("--store", help="store path or ducklake: URL (default: $STEPSCOPE_STORE)")
    p.add_argument("--comm-run", action="append", default=[], metavar="RUN_ID",
                   help="use this stored comm / nccl-tests run's curves (repeatable; default: "
                   "the host's GPU comm runs)")  # fmt: skip
    p.add_argument("--layouts", help="comma list of layout kinds or names (default: all)")
    p.add_argument("--concurrency", default="1-512",
                   help="grid, e.g. 1-512 or 1,2,4,8 (default 1-512)")  # fmt: skip
    p.add_argument("--report", help="concurrencies to print (default: powers of two)")
    p.add_argument("--context", type=int, default=Assumptions.context_tokens,
                   help="tokens in each sequence's KV cache (default %(default)s)")  # fmt: skip
    p.add_argument("--isl", type=int, help="benchmark input tokens: the context becomes "
                   "I + O/2 and the serving model predicts each layout (with --osl)")  # fmt: skip
    p.add_argument("--osl", type=int, help="benchmark output tokens (with --isl)")
    p.add_argument("--policy", help="policy file (default: the full-precision policy)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    return p


def parse_ints(text: str, what: str) -> list[int]:
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo or hi - lo > 100_000:
                    raise ValueError
                out += range(lo, hi + 1)
            elif part:
                out.append(int(part))
    except ValueError:
        raise PlannerInputError(f"{what} {text!r}: give numbers like 1-512 or 1,2,4,8") from None
    if not out:
        raise PlannerInputError(f"{what} {text!r}: empty")
    return out


def _store(store: str | None, what: str):
    from store.location import resolve
    from store.reader import store_exists

    loc = resolve(store)
    if not store_exists(loc):
        raise PlannerInputError(f"{what}: there is no store at {loc.describe()}")
    return loc


def stored_curves(host: str | None, run_ids: list[str], store: str | None, interconnect: str):
    """Measured curves: the given comm runs (any device), else the host's GPU comm runs."""
    from planner.comm import curves_from_rows
    from store import queries_planner as qp

    loc = _store(store, "--comm-run")
    if run_ids:
        rows = qp.comm_rows(loc, run_ids)
        found = set(rows["run_id"]) if len(rows) else set()
        missing = [r for r in run_ids if r not in found]
        if missing:
            raise PlannerInputError(f"--comm-run {missing[0]}: no such comm run in the store")
        return curves_from_rows(rows.to_dict("records"), interconnect, devices=())
    runs = qp.comm_runs(loc, host)
    if runs.empty:
        return []
    rows = qp.comm_rows(loc, runs["run_id"].tolist())
    return curves_from_rows(rows.to_dict("records"), interconnect)


def run_plan(args: argparse.Namespace) -> PlanResult:
    kwargs: dict[str, Any] = {}
    if args.preset:
        model, hw = models.preset(reference.MODEL), hardware.preset(reference.HOST)
        kwargs.update(reference.plan_kwargs())
    else:
        if not args.host and not args.host_from_store:
            raise PlannerInputError("--host is required with --model (or --host-from-store)")
        model = models.resolve(args.model)
        from store.errors import StoreError

        try:
            host = hosts.from_args(args)
            hw = host.hardware
            if host.stored:
                kwargs["comm_curves"] = stored_curves(host.stored, args.comm_run, args.store,
                                                      hw.interconnect)  # fmt: skip
            if args.comm_run and "comm_curves" not in kwargs:
                kwargs["comm_curves"] = stored_curves(None, args.comm_run, args.store,
                                                      hw.interconnect)  # fmt: skip
        except StoreError as exc:
            raise PlannerInputError(f"store: {exc}") from None
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        raise PlannerInputError(str(exc)) from None
    wanted = [x.strip() for x in args.layouts.split(",")] if args.layouts else None
    layouts = select(default_layouts(model, hw), wanted)
    context = args.context
    if (args.isl is None) != (args.osl is None):
        raise PlannerInputError("--isl and --osl go together")
    if args.isl is not None:
        if args.isl < 1 or args.osl < 2:
            raise PlannerInputError("--isl must be >= 1 and --osl >= 2")
        context = args.isl + args.osl // 2
    res = plan(model, hw, layouts, parse_ints(args.concurrency, "--concurrency"),
               policy=policy, assumptions=Assumptions(context_tokens=context), **kwargs)  # fmt: skip
    if args.isl is not None:
        res.serving = serving_curves(model, hw, [r.layout for r in res.layouts], args.isl,
                                     args.osl, res.concurrency, kwargs.get("comm_curves"))  # fmt: skip
        res.serving_io = (args.isl, args.osl)
    return res


def render_text(res: PlanResult, cs: list[int], preset: bool) -> str:
    lines = [f"{res.model.name} on {res.hardware.gpu_count}x {res.hardware.gpu_model} "
             f"({res.hardware.name}), policy {res.policy.label}", ""]  # fmt: skip
    width = max(len(r.layout.name) for r in res.layouts) + 2
    lines.append("TPOT ms by concurrency".ljust(width) + "".join(f"{c:>9}" for c in cs))
    for r in res.layouts:
        cells = []
        for c in cs:
            p = res.point(r, c)
            cells.append(f"{p['tpot_ms']:>8.2f}" + (" " if p["fits"] else "*"))
        tag = "" if r.compliant else "  BLOCKED: " + ", ".join(v.rule_id for v in r.violations)
        lines.append(r.layout.name.ljust(width) + "".join(cells) + tag)
    lines += ["(* does not fit in GPU memory)", "", "Recommended (compliant, fits):"]
    lines += [f"  concurrency {x.start}-{x.end}: {x.layout}" for x in res.recommended] or [
        "  nothing compliant fits"]  # fmt: skip
    if res.crossovers:
        lines += ["", "Crossovers:"] + [f"  {x.sentence()}" for x in res.crossovers[:12]]
    costs = [x for x in res.policy_costs if x.concurrency in cs]
    lines += ["", "Policy:"] + ([f"  {x.sentence()}" for x in costs] or [
        "  costs nothing in TPOT at these concurrencies (where both fit)"])  # fmt: skip
    if res.findings:
        lines += ["", "Findings:"] + [f"  {f}" for f in res.findings]
    if preset:
        lines += ["", "Published figure vs model (published figures, not measured runs):"]
        lines += [f"  {c['figure']}: published {c['published']}; model {c['model']}"
                  for c in reference.checks(res)]  # fmt: skip
    if getattr(res, "serving", None):
        isl, osl = res.serving_io
        lines += ["", f"Serving prediction, {isl} in / {osl} out (mean TPOT ms, band: 80% of "
                  "measured within):"]  # fmt: skip
        for item in serving_json(res.serving, cs):
            if item["why_not"]:
                lines.append(f"  {item['layout']}: no prediction ({item['why_not']})")
                continue
            cells = ", ".join(f"c={p['concurrency']}: {p['tpot_ms']:.2f} [{p['tpot_low_ms']:.1f}-"
                              f"{p['tpot_high_ms']:.1f}]" for p in item["points"])  # fmt: skip
            lines.append(f"  {item['layout']}: {cells}")
    lines += ["", "Assumptions:"] + [f"  {a.what}: {a.value} [{a.source}]" for a in res.assumptions]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        res = run_plan(args)
        cs = parse_ints(args.report, "--report") if args.report else res.report_concurrencies()
        missing = [c for c in cs if c not in set(res.concurrency.tolist())]
        if missing:
            raise PlannerInputError(f"--report {missing[0]} is outside --concurrency")
    except PlannerInputError as exc:
        print(f"planner: {exc}", file=sys.stderr)
        return 1
    if args.json:
        data = res.to_json(cs)
        if getattr(res, "serving", None):
            data["serving"] = {"isl": res.serving_io[0], "osl": res.serving_io[1],
                               "layouts": serving_json(res.serving, cs)}  # fmt: skip
        if args.preset:
            data["published"] = {"name": reference.NAME, "label": "published figures",
                                 "figures": reference.PUBLISHED,
                                 "checks": reference.checks(res)}  # fmt: skip
        print(json.dumps(data, default=_jsonable))
    else:
        print(render_text(res, cs, bool(args.preset)))
    return 0


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
