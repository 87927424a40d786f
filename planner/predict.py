"""``python -m planner predict``: one serving instance, one answer (the serving cost model).

    python -m planner predict --model CONFIG.json|PRESET --host PRESET|HOST_FILE [--gpus N]
        --tp T [--dp D] [--ep] [--all2all-backend B] [--allreduce nccl|fast] [--replicas R]
        --isl I --osl O --concurrency C[,C...] [--engine vllm|sglang|trtllm]
        [--kv-dtype auto|fp8] [--a2a-dtype auto|fp8] [--marlin-input-dtype auto|fp8]
        [--adp-balance-iters N] [--scheduler-recv-interval R]
        [--batch-wait-iters N --batch-wait-ratio F] [--json]
    python -m planner predict --preset reference-kimi-k25-rtxpro6000 --tp 8 ...

Driven like ``vllm bench serve --random-input-len I --random-output-len O --max-concurrency C``.
``--dp D --ep`` is vLLM's ``--data-parallel-size D --enable-expert-parallel`` (attention DP,
C is the client's total). Every layout ``python -m planner`` lists answers here with the
flags its ``--json`` prints under ``predict``: the same model, the same numbers.
Exit codes: 0 ok, 1 bad input (one line on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from planner import hosts, measurements
from planner.cli import (
    add_expert_load_argument,
    add_workload_arguments,
    parse_ints,
    stored_curves,
    stored_expert_load,
)
from planner.cost.bands import band
from planner.cost.calibrate import calibrate
from planner.cost.comm import CommSet, published_for
from planner.cost.expert_load import PLACEMENTS
from planner.cost.params import DESCRIBE, FITTED, ServingParams
from planner.cost.serving import ServeLayout, Workload
from planner.cost.step_comm import A2A_BACKENDS
from planner.errors import PlannerInputError
from planner.policy.check import PolicyError, check_precision, load_policy
from planner.sched.bench import client_text
from planner.specs import hardware, models
from planner.specs.engines import budget_text
from planner.tradeoff import reference
from planner.tradeoff.instances import Instance, predict_instance
from planner.tradeoff.layouts import NVLINK_RUNS_CUSTOM_ALLREDUCE, offers_fast_allreduce
from planner.tradeoff.placement import expert_load_block, routing_assumption

MAX_POINTS = 64
FP8 = "fp8_e4m3"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m planner predict",
                                description="Mean TPOT, TTFT and output tokens/s of one "
                                "serving instance, from the serving cost model.",
                                epilog="exit codes: 0 ok, 1 bad input, 2 usage")  # fmt: skip
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="config.json path (or its directory) or preset: "
                     + ", ".join(models.MODEL_PRESETS))  # fmt: skip
    src.add_argument("--preset", choices=[reference.NAME], help="the published reference "
                     "case: its model, host and published collective figures")  # fmt: skip
    hosts.add_arguments(p, with_store=True)
    p.add_argument("--comm-run", action="append", default=[], metavar="RUN_ID",
                   help="use this stored comm run's curves (repeatable)")
    p.add_argument("--gpus", type=int, help="GPUs of the instance (default tp x dp)")
    p.add_argument("--tp", type=int, required=True, help="tensor-parallel size")
    p.add_argument("--dp", type=int, default=1, help="attention data-parallel size")
    p.add_argument("--ep", action="store_true", help="expert parallel for the MoE layers")
    p.add_argument("--all2all-backend", default="", choices=("", *A2A_BACKENDS),
                   help="MoE token exchange under EP (vLLM --all2all-backend; with --dp 1 "
                   "and --engine sglang: TP attention + DeepEP MoE)")  # fmt: skip
    p.add_argument("--allreduce", default="nccl", choices=("nccl", "fast"),
                   help="fast: the custom / FlashInfer PCIe-IPC AllReduce")  # fmt: skip
    add_expert_load_argument(p)
    p.add_argument("--expert-placement", default="contiguous", choices=PLACEMENTS,
                   help="with --expert-load: experts placed contiguously (the engines' "
                   "default) or balanced by the measured load (EPLB-style packing)")  # fmt: skip
    p.add_argument("--replicas", type=int, default=1,
                   help="independent instances behind a load balancer (each gets C / R)")
    add_workload_arguments(p, required=True)
    p.add_argument("--concurrency", required=True, help="client concurrency, e.g. 1,8,64")
    p.add_argument("--kv-dtype", default="auto", choices=("auto", "fp8"))
    p.add_argument("--a2a-dtype", default="auto", choices=("auto", "fp8"),
                   help="fp8: FP8 dispatch and combine payloads (a downcast)")
    p.add_argument("--marlin-input-dtype", default="auto", choices=("auto", "fp8"),
                   help="fp8: W4A8 Marlin inputs, VLLM_MARLIN_INPUT_DTYPE (a downcast)")
    p.add_argument("--no-cuda-graphs", action="store_true", help="--enforce-eager")
    for flag, kind, default, metavar, text in SCHEDULER_FLAGS:
        p.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    p.add_argument("--policy", help="policy file (default: the full-precision policy)")
    measurements.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


# Engine scheduler settings the server was launched with: (flag, type, default, metavar, help).
SCHEDULER_FLAGS: tuple[tuple[str, type, float, str, str], ...] = (
    ("--adp-balance-iters", int, 0, "N", "TensorRT-LLM with --dp: the server ran "
     "attention_dp_config enable_balance with timeout_iters N (prompts wait for every rank "
     "to have one); default 0, balance off as in TensorRT-LLM"),
    ("--scheduler-recv-interval", int, 1, "R", "SGLang: the server's "
     "--scheduler-recv-interval (it polls for new requests every R decode steps); default 1, "
     "as in SGLang"),
    ("--batch-wait-iters", int, 0, "N", "TensorRT-LLM at --dp 1: the server's "
     "batch_wait_timeout_iters (while requests decode, prompts are held up to N steps to "
     "batch them); default 0, off as in TensorRT-LLM"),
    ("--batch-wait-ratio", float, 0.0, "F", "TensorRT-LLM: the server's "
     "batch_wait_max_tokens_ratio (held prompts go once a step's tokens reach F x "
     "max_num_tokens); default 0"),
)  # fmt: skip


def layout_from(args: argparse.Namespace) -> ServeLayout:
    tp, dp, ep, gpus = args.tp, args.dp, args.ep, args.gpus
    if tp < 1 or dp < 1:
        raise PlannerInputError("--tp and --dp must be >= 1")
    if gpus is not None and gpus != tp * dp:
        raise PlannerInputError(f"--gpus {gpus}: one instance uses --tp x --dp = {tp * dp}")
    n = tp * dp
    return ServeLayout(tp=tp, dp=dp, moe_tp=1 if ep else n, moe_ep=n if ep else 1,
                       a2a=args.all2all_backend,
                       allreduce="all_reduce_fast" if args.allreduce == "fast" else "all_reduce")


def _target(args: argparse.Namespace):
    """(model, hardware, comm curves, whether published curves for the GPUs fill in, the
    stored host's name or None)."""
    if args.preset:
        return (models.preset(reference.MODEL), hardware.preset(reference.HOST),
                reference.comm_curves(), False, None)  # fmt: skip
    if not args.host and not args.host_from_store:
        raise PlannerInputError("--host PRESET|FILE or --host-from-store HOST is required")
    model = models.resolve(args.model)
    from store.errors import StoreError

    try:
        host = hosts.from_args(args)
        hw = host.hardware
        curves = (stored_curves(host.stored, args.comm_run, args.store, hw.interconnect)
                  if host.stored or args.comm_run else [])  # fmt: skip
    except StoreError as exc:
        raise PlannerInputError(f"store: {exc}") from None
    return model, hw, curves, True, host.stored


def run(args: argparse.Namespace, params: ServingParams = FITTED) -> dict[str, Any]:
    model, hw, curves, fill, stored = _target(args)
    points, traces, skipped = measurements.gather(args, model, hw, stored)
    if args.preset:
        points, traces = reference.measured(), reference.traces()
    lay = layout_from(args)
    if lay.gpus * args.replicas > hw.gpu_count and not hw.max_gpus:
        raise PlannerInputError(f"--tp {args.tp} --dp {args.dp} x {args.replicas} replica(s) "
                                f"needs {lay.gpus * args.replicas} GPUs; host {hw.name!r} has "
                                f"{hw.gpu_count}")  # fmt: skip
    if args.replicas < 1:
        raise PlannerInputError("--replicas must be >= 1")
    if lay.gpus > hw.gpu_count:
        hw = hardware.with_count(hw, lay.gpus)
    conc = parse_ints(args.concurrency, "--concurrency")
    if len(conc) > MAX_POINTS or min(conc) < 1 or max(conc) > 65536:
        raise PlannerInputError(f"--concurrency: 1-{MAX_POINTS} values between 1 and 65536")
    if args.num_prompts < 0:
        raise PlannerInputError("--num-prompts must be >= 0")
    kv = FP8 if args.kv_dtype == "fp8" else ""
    a2a = FP8 if args.a2a_dtype == "fp8" else ""
    act = FP8 if args.marlin_input_dtype == "fp8" else ""
    load = None
    if args.expert_load:
        load = stored_expert_load(args.expert_load, args.store, model, args.expert_placement)
    elif args.expert_placement != "contiguous":
        raise PlannerInputError("--expert-placement: give --expert-load RUN_ID to place")
    w = Workload(args.isl, args.osl, args.engine, kv, not args.no_cuda_graphs, a2a, act,
                 args.num_prompts, args.token_budget, args.adp_balance_iters,
                 args.scheduler_recv_interval, args.batch_wait_iters,
                 args.batch_wait_ratio, expert_load=load, bench=args.bench,
                 range_ratio=args.range_ratio, max_running=args.max_running_requests)  # fmt: skip
    comm = CommSet(curves + (published_for(hw.gpu_model, hw.gpu_count) if fill else []), hw,
                   params.link_eff)  # fmt: skip
    if (lay.allreduce == "all_reduce_fast" and not offers_fast_allreduce(hw)
            and comm.kind("all_reduce_fast", lay.tp) == "derived"):  # fmt: skip
        raise PlannerInputError(
            f"--allreduce fast: {NVLINK_RUNS_CUSTOM_ALLREDUCE} (--allreduce nccl costs it); "
            "compare another one with --comm-run RUN_ID of a measured fast AllReduce")
    inst = Instance(lay, args.replicas, w)
    pr = predict_instance(model, inst, hw, np.asarray(conc), params, comm)
    cal = calibrate(model, hw, points, traces, comm, params) if points or traces else None
    if cal is not None:
        cal.notes += skipped  # stored points physics rules out (planner.physical)
    try:
        pol = load_policy(args.policy)
    except PolicyError as exc:
        raise PlannerInputError(str(exc)) from None
    n = model.native
    used = replace(n, kv_cache=kv or n.kv_cache, activations=act or n.activations,
                   communication=a2a or n.communication,
                   dispatch=a2a or n.dispatch or n.communication)  # fmt: skip
    violations = check_precision(n, used, pol)
    tb, fb = band(args.engine, model, "tpot", hw), band(args.engine, model, "ttft", hw)
    points = [{"concurrency": int(c), "tpot_ms": round(float(pr.tpot_ms[i]), 3),
               "tpot_ms_low": round(float(tb.low(pr.tpot_ms[i])), 3),
               "tpot_ms_high": round(float(tb.high(pr.tpot_ms[i])), 3),
               "ttft_ms": round(float(pr.ttft_ms[i]), 2),
               "ttft_ms_low": round(float(fb.low(pr.ttft_ms[i])), 2),
               "ttft_ms_high": round(float(fb.high(pr.ttft_ms[i])), 2),
               "output_tok_s": round(float(pr.output_tok_s[i]), 1),
               "running_per_rank": int(round(float(pr.running[i]))),
               "percentiles": {k: {q: round(float(v[i]), 3) for q, v in d.items()}
                               for k, d in pr.percentiles.items()},
               "itl_ms": round(float(pr.itl_ms[i]), 3), "e2el_ms": round(float(pr.e2el_ms[i]), 1),
               "running_mean": round(float(pr.running[i]), 2),
               "queued_mean": round(float(pr.queued[i]), 2),
               "simulation": simulation_note(pr, int(c)),
               "breakdown_ms": {k: round(float(np.broadcast_to(v, pr.tpot_ms.shape)[i]), 3)
                                for k, v in pr.breakdown_ms.items()}}
              for i, c in enumerate(conc)]  # fmt: skip
    if cal is not None:
        cp = predict_instance(model, inst, hw, np.asarray(conc), cal.params_for(lay), comm)
        cb = cal.band or tb
        for i, point in enumerate(points):
            point["calibrated"] = {"tpot_ms": round(float(cp.tpot_ms[i]), 3),
                                   "tpot_ms_low": round(float(cb.low(cp.tpot_ms[i])), 3),
                                   "tpot_ms_high": round(float(cb.high(cp.tpot_ms[i])), 3),
                                   "ttft_ms": round(float(cp.ttft_ms[i]), 2)}  # fmt: skip
    return {
        "model": model.name, "host": hw.name, "gpu_model": hw.gpu_model,
        "gpus": lay.gpus * args.replicas, "engine": args.engine,
        "isl": args.isl, "osl": args.osl,
        "layout": {"tp": lay.tp, "dp": lay.dp, "ep": bool(args.ep), "moe_tp": lay.moe_tensor,
                   "moe_ep": lay.moe_ep, "all2all_backend": lay.a2a,
                   "allreduce": args.allreduce, "replicas": args.replicas,
                   "name": lay.describe()},
        "policy": {"label": pol.label, "compliant": not violations,
                   "violations": [{"rule": v.rule_id, "sentence": v.sentence}
                                  for v in violations]},
        "weights_per_gpu_gb": round(pr.weights_per_gpu_gb, 2),
        "kv_capacity_seqs_per_rank": round(pr.kv_capacity_seqs, 1),
        "collectives": [{"op": op, "world_size": k, "kind": comm.kind(op, k),
                         "source": comm.get(op, k).source, "sizes": comm.explain(op, k)}
                        for op, k in pr.collectives],
        "comm_not_used": [n.to_json() for n in comm.not_used()],
        "band": {"tpot": tb.describe(), "ttft": fb.describe()},
        "points": points,
        "assumptions": assumptions(model, hw, w, params),
        **({"expert_load": expert_load_block(model, hw, inst, conc, params, comm, pr.tpot_ms)}
           if load is not None else {}),
        **({"calibration": cal.to_json()} if cal is not None else {}),
    }  # fmt: skip


def simulation_note(pr, conc: int) -> dict[str, Any]:
    """How the point was simulated: the benchmark's prompts, how many requests ran step by
    step, where the steady state converged (the rest stood for by its window), or the
    simulated concurrencies it lies between."""
    for x, note in zip(pr.simulated, pr.simulation, strict=True):
        if int(x) == conc:
            return {**note, "interpolated": False}
    sims = [int(x) for x in pr.simulated]
    lower = max((x for x in sims if x < conc), default=sims[0])
    upper = min((x for x in sims if x > conc), default=sims[-1])
    return {"interpolated": True, "between": [lower, upper]}


def balance_text(timeout_iters: int) -> str:
    if not timeout_iters:
        return ""
    return (f"; attention-DP balance on (timeout_iters {timeout_iters}): a later prompt waits "
            "for every rank to hold one or for the timeout (--adp-balance-iters)")


def recv_text(interval: int) -> str:
    if interval <= 1:
        return ""
    return (f"; polls for new requests every {interval} decode steps: a later prompt waits "
            f"{interval / 2:g} steps on average and is prefilled with the others that came "
            "since the last poll (--scheduler-recv-interval)")


def batch_wait_text(iters: int, ratio: float) -> str:
    if not (iters and ratio):
        return ""
    return (f"; batch waiting (batch_wait_timeout_iters {iters}, batch_wait_max_tokens_ratio "
            f"{ratio:g}): while requests decode, prompts are held until their tokens reach "
            f"{ratio:g} of the token budget or for {iters} steps, then prefilled together "
            "(--batch-wait-iters, --batch-wait-ratio)")


def assumptions(model, hw, w: Workload, p: ServingParams) -> list[dict[str, str]]:
    budget = budget_text(w.engine, hw, w.isl, w.token_budget)
    out = [
        {"what": "model", "value": f"{model.name}: {model.num_layers} layers, "
         f"{model.num_experts} experts top-{model.top_k}, {model.attention.upper()}, "
         f"weights {model.native.weights}, KV {w.kv_dtype or model.native.kv_cache}",
         "source": model.source},
        {"what": "host", "value": f"{hw.gpu_count}x {hw.gpu_model}, {hw.memory_bytes / hardware.GIB:.0f} "
         f"GiB, {hw.mem_bandwidth_gbps:.0f} GB/s, {hw.interconnect} {hw.link_gbps:.0f} GB/s",
         "source": hw.source},
        {"what": "workload", "value": client_text(w.bench, w.isl, w.osl, w.range_ratio,
                                                   w.num_prompts),
         "source": "planner/sched (--bench, --range-ratio, --num-prompts)"},
        {"what": "engine scheduler", "value": f"{w.engine}: {budget};"
         " chunking and overlap from its source defaults" + balance_text(w.adp_balance_iters)
         + recv_text(w.recv_interval)
         + batch_wait_text(w.batch_wait_iters, w.batch_wait_ratio),
         "source": "--token-budget" if w.token_budget else "planner/specs/engines.py"},
        {"what": "CUDA graphs", "value": "on" if w.cuda_graphs else "off (eager)",
         "source": "engine default" if w.cuda_graphs else "--no-cuda-graphs"},
        vars(routing_assumption(w.expert_load)),
    ]  # fmt: skip
    for name, (what, src) in DESCRIBE.items():
        val = getattr(p, name)
        val = val.get(w.engine, val.get("vllm")) if isinstance(val, dict) else val
        out.append({"what": name, "value": f"{val:.4g} ({what})", "source": src +
                    (" on the Blackwell fixture, python -m fitting" if "fitted" in src
                     else "")})  # fmt: skip
    return out


def render(data: dict[str, Any]) -> str:
    lay, pol = data["layout"], data["policy"]
    lines = [f"{data['model']} on {data['gpus']}x {data['gpu_model']} ({data['host']}), {lay['name']}, "
             f"{data['engine']}, {data['isl']} in / {data['osl']} out",
             f"policy: {'compliant' if pol['compliant'] else 'BREAKS the policy: '}"
             + "; ".join(v["sentence"] for v in pol["violations"]), "",
             f"{'concurrency':>11} {'TPOT ms':>9} {'TTFT ms':>9} {'output tok/s':>13}"]  # fmt: skip
    for p in data["points"]:
        line = (f"{p['concurrency']:>11} {p['tpot_ms']:>9.2f} {p['ttft_ms']:>9.1f} "
                f"{p['output_tok_s']:>13.1f}   TPOT {p['tpot_ms_low']:.2f}-{p['tpot_ms_high']:.2f}")
        if "calibrated" in p:
            c = p["calibrated"]
            line += (f"   calibrated {c['tpot_ms']:.2f} ({c['tpot_ms_low']:.2f}-"
                     f"{c['tpot_ms_high']:.2f}), TTFT {c['ttft_ms']:.1f}")  # fmt: skip
        lines.append(line)
    lines += ["", f"Band (80% of measured runs): {data['band']['tpot']}", "", "Collectives:"]
    lines += [f"  {c['op']} over {c['world_size']} GPUs: {c['kind']}, {c['source']}"
              + (f" ({c['sizes']})" if c["sizes"] else "") for c in data["collectives"]]
    lines += [f"  not used: {n['measured']} over {n['world_size']} GPUs ({n['source']}): {n['why']}"
              for n in data["comm_not_used"]]  # fmt: skip
    if "expert_load" in data:
        el = data["expert_load"]
        lines += ["", f"Expert load ({el['source']}), priced with {el['placement']} placement:",
                  f"{'concurrency':>11} {'uniform':>9} {'contiguous':>11} {'balanced':>9} "
                  f"{'balanced wins':>14}"]  # fmt: skip
        lines += [f"{q['concurrency']:>11} {q['tpot_ms_uniform']:>9.2f} "
                  f"{q['tpot_ms_contiguous']:>11.2f} {q['tpot_ms_balanced']:>9.2f} "
                  f"{q['balanced_win_ms']:>11.2f} ms" for q in el["points"]]  # fmt: skip
    if "calibration" in data:
        cal = data["calibration"]
        lines += ["", f"Calibrated: {cal['sentence']}"]
        lines += [f"  {k}: {v}" for k, v in cal["pinned"].items()]
        lines += [f"  note: {n}" for n in cal["notes"]]
    lines += ["", "Assumptions:"] + [f"  {a['what']}: {a['value']} [{a['source']}]"
                                     for a in data["assumptions"]]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        data = run(args)
    except PlannerInputError as exc:
        print(f"planner predict: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(data) if args.json else render(data))
    return 0
