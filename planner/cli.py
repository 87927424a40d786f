"""``python -m planner``: the tradeoff calculator on the command line (same numbers as the page).

    python -m planner --preset reference-kimi-k25-rtxpro6000 [--json]
    python -m planner --model CONFIG.json|PRESET --host PRESET|HOST_FILE [--json]
    python -m planner --model CONFIG.json|PRESET --host-from-store HOST [--store S] [--json]
    python -m planner --model PRESET --host PRESET --expert-load RUN_ID [--store S]
    python -m planner ... [--calibrate-from-store] [--measured FILE.csv]   # the calibrated view
    python -m planner ... --tpot-ms T --ttft-ms F [--slo-stat mean|p90|p99]  # latency targets

Exit codes: 0 ok, 1 bad input (one line on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from planner import hosts, measurements
from planner.errors import PlannerInputError
from planner.policy.check import PolicyError, load_policy
from planner.sched.bench import BENCHES
from planner.specs import hardware, models
from planner.specs.engines import ENGINES
from planner.tradeoff import reference
from planner.tradeoff.layouts import default_layouts, select
from planner.tradeoff.plan import plan
from planner.tradeoff.report_json import to_json
from planner.tradeoff.report_text import render_text
from planner.tradeoff.slo import STATS, SloAnswer, Targets, meet_targets
from planner.tradeoff.slo import to_json as slo_json
from planner.tradeoff.types import PlanResult


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
    add_expert_load_argument(p)
    p.add_argument("--layouts", help="comma list of layout kinds or names (default: all)")
    p.add_argument("--concurrency", default="1-512",
                   help="grid, e.g. 1-512 or 1,2,4,8 (default 1-512)")  # fmt: skip
    p.add_argument("--report", help="concurrencies to print (default: powers of two)")
    add_workload_arguments(p)
    p.add_argument("--policy", help="policy file (default: the full-precision policy)")
    measurements.add_arguments(p)
    add_target_arguments(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    return p


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tpot-ms", type=float, metavar="T",
                   help="latency target: TPOT at most T ms (with --ttft-ms); the answer is "
                   "the layout serving the most output tokens/s per GPU within both")  # fmt: skip
    p.add_argument("--ttft-ms", type=float, metavar="F",
                   help="latency target: TTFT at most F ms (with --tpot-ms)")
    p.add_argument("--slo-stat", default="mean", choices=STATS,
                   help="the statistic the targets hold on (p90 / p99: per-request "
                   "percentiles where the predictions carry them, else the mean stands in "
                   "and the answer says so); default mean")  # fmt: skip


def targets_from(args: argparse.Namespace) -> Targets | None:
    """The latency targets the flags give (both or neither), checked."""
    if args.tpot_ms is None and args.ttft_ms is None:
        if args.slo_stat != "mean":
            raise PlannerInputError("--slo-stat: give the targets too (--tpot-ms T --ttft-ms F)")
        return None
    if args.tpot_ms is None or args.ttft_ms is None:
        raise PlannerInputError("latency targets: give both --tpot-ms T and --ttft-ms F")
    return Targets(args.tpot_ms, args.ttft_ms, args.slo_stat).check()


def add_workload_arguments(p: argparse.ArgumentParser, required: bool = False) -> None:
    """The benchmark both commands predict: ``vllm bench serve`` random prompts."""
    p.add_argument("--isl", type=int, required=required, default=None if required else 1024,
                   help="input tokens per request (1 = decode only)"
                   + ("" if required else "; default %(default)s"))  # fmt: skip
    p.add_argument("--osl", type=int, required=required, default=None if required else 1024,
                   help="output tokens per request" + ("" if required else
                                                       "; default %(default)s"))  # fmt: skip
    p.add_argument("--engine", default="vllm", choices=tuple(ENGINES),
                   help="serving engine (SGLang-only layouts are predicted on SGLang)")  # fmt: skip
    p.add_argument("--bench", default="inferencex", choices=tuple(BENCHES),
                   help="the benchmark client predicted: inferencex (the fit's runs: "
                   "10 x C prompts, lengths uniform in [0.8 L, L]), vllm (vllm bench serve: "
                   "fixed lengths, 1000 prompts) or sglang (bench_serving: lengths uniform in "
                   "[1, L], 1000 prompts); default %(default)s")  # fmt: skip
    p.add_argument("--range-ratio", type=float, default=-1.0, metavar="R",
                   help="the client's --random-range-ratio (default: the tool's)")
    p.add_argument("--num-prompts", type=int, default=0, metavar="N",
                   help="requests the benchmark sends (--num-prompts); default: the tool's")
    p.add_argument("--max-running-requests", type=int, default=0, metavar="N",
                   help="requests the engine runs at once, as launched: vLLM --max-num-seqs "
                   "(per DP engine), SGLang --max-running-requests (split over --dp ranks), "
                   "TRT-LLM --max_batch_size; default: the engine's default")  # fmt: skip
    p.add_argument("--token-budget", type=int, default=0, metavar="N",
                   help="tokens one engine step carries, as the server was launched: vLLM "
                   "--max-num-batched-tokens (per DP engine), SGLang --chunked-prefill-size "
                   "(split over --dp ranks), TRT-LLM --max_num_tokens; default: the engine's "
                   "default for the GPU")  # fmt: skip


def add_expert_load_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expert-load", metavar="RUN_ID",
                   help="price the routed experts on this stored `expert-load` run's measured "
                   "routing (python -m collectors expert-load) instead of uniform top-k; "
                   "with --store")  # fmt: skip


def stored_expert_load(run_id: str, store: str | None, model, placement: str = "contiguous"):
    """The ExpertLoad of a stored ``expert-load`` run, checked against ``model``'s shape."""
    from planner.cost.expert_load import ExpertLoad
    from store.errors import StoreError
    from store.queries import experts as qe

    try:
        loc = _store(store, "--expert-load")
        meta = qe.run(loc, run_id)
        counts = qe.count_matrix(loc, run_id) if not meta.empty else None
    except StoreError as exc:
        raise PlannerInputError(f"--expert-load {run_id}: store: {exc}") from None
    if counts is None:
        raise PlannerInputError(f"--expert-load {run_id}: no such expert-load run in the store "
                                f"(python -m collectors expert-load records one)")  # fmt: skip
    row = meta.iloc[0]
    load = ExpertLoad(counts, source=f"expert-load run {run_id} ({row['model_id']}, "
                      f"{row['recorder_mode']})", run_id=run_id, placement=placement)  # fmt: skip
    load.check(model.num_layers, model.num_experts, model.name)
    return load


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
    """Measured curves: the given comm runs (any device, used even where their run names no
    GPU), else the host's GPU comm runs."""
    from planner.cost.comm import curves_from_rows
    from store.queries import planner as qp

    loc = _store(store, "--comm-run")
    if run_ids:
        rows = qp.comm_rows(loc, run_ids)
        found = set(rows["run_id"]) if len(rows) else set()
        missing = [r for r in run_ids if r not in found]
        if missing:
            raise PlannerInputError(f"--comm-run {missing[0]}: no such comm run in the store")
        return curves_from_rows(rows.to_dict("records"), interconnect, devices=(), chosen=True)
    return hosts.host_comm_curves(loc, host, interconnect)


def run_plan(args: argparse.Namespace) -> PlanResult:
    kwargs: dict[str, Any] = {}
    stored = None
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
            hw, stored = host.hardware, host.stored
            if host.stored:
                kwargs["comm_curves"] = stored_curves(host.stored, args.comm_run, args.store,
                                                      hw.interconnect)  # fmt: skip
            if args.comm_run and "comm_curves" not in kwargs:
                kwargs["comm_curves"] = stored_curves(None, args.comm_run, args.store,
                                                      hw.interconnect)  # fmt: skip
        except StoreError as exc:
            raise PlannerInputError(f"store: {exc}") from None
    points, traces, skipped = measurements.gather(args, model, hw, stored)
    for line in skipped:  # stored points physics rules out (planner.physical)
        print(f"planner: {line}", file=sys.stderr)
    if points or traces:
        kwargs.update(measured=points, traces=traces)
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        raise PlannerInputError(str(exc)) from None
    wanted = [x.strip() for x in args.layouts.split(",")] if args.layouts else None
    layouts = select(default_layouts(model, hw), wanted)
    if args.num_prompts < 0:
        raise PlannerInputError("--num-prompts must be >= 0")
    if args.expert_load:
        kwargs["expert_load"] = stored_expert_load(args.expert_load, args.store, model)
    return plan(model, hw, layouts, parse_ints(args.concurrency, "--concurrency"),
                policy=policy, isl=args.isl, osl=args.osl, engine=args.engine,
                num_prompts=args.num_prompts, token_budget=args.token_budget,
                bench=args.bench, range_ratio=args.range_ratio,
                max_running=args.max_running_requests, **kwargs)  # fmt: skip


def target_args(args: argparse.Namespace) -> str:
    """The --model / --host flags that name this plan's model and host for `predict`."""
    if args.preset:
        return f"--preset {reference.NAME}" + (
            f" --store {args.store}" if args.store and args.expert_load else "")  # fmt: skip
    host = (f"--host-from-store {args.host_from_store}" if args.host_from_store
            else f"--host {args.host}")  # fmt: skip
    store = f" --store {args.store}" if args.store and (
        args.host_from_store or args.comm_run or args.expert_load) else ""  # fmt: skip
    runs = "".join(f" --comm-run {r}" for r in args.comm_run)
    return f"--model {args.model} {host}{store}{runs}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        targets = targets_from(args)
        res = run_plan(args)
        cs = parse_ints(args.report, "--report") if args.report else res.report_concurrencies()
        missing = [c for c in cs if c not in set(res.concurrency.tolist())]
        if missing:
            raise PlannerInputError(f"--report {missing[0]} is outside --concurrency")
    except PlannerInputError as exc:
        print(f"planner: {exc}", file=sys.stderr)
        return 1
    slo: SloAnswer | None = meet_targets(res, targets) if targets else None
    if args.json:
        data = to_json(res, cs, target_args(args))
        if slo is not None:
            data["slo"] = slo_json(slo)
            if slo.stat_note():
                print(f"planner: {slo.stat_note()}", file=sys.stderr)
        if args.preset:
            data["published"] = {"name": reference.NAME, "label": "published figures",
                                 "figures": reference.PUBLISHED,
                                 "checks": reference.checks(res),
                                 "allreduce_floor": reference.allreduce_floor().as_dict()}  # fmt: skip
        print(json.dumps(data, default=_jsonable))
    else:
        print(render_text(res, cs, bool(args.preset), slo))
    return 0


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
