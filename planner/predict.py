"""``python -m planner predict``: one serving instance, one answer (the serving cost model).

    python -m planner predict --model CONFIG.json|PRESET --host PRESET|HOST_FILE [--gpus N]
        --tp T [--dp D] [--ep] --isl I --osl O --concurrency C[,C...]
        [--engine vllm|sglang|trtllm] [--kv-dtype auto|fp8] [--json]

Driven like ``vllm bench serve --random-input-len I --random-output-len O --max-concurrency C``.
``--dp D --ep`` is vLLM's ``--data-parallel-size D --enable-expert-parallel`` (attention DP,
C is the client's total). Exit codes: 0 ok, 1 bad input (one line on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from planner import hardware, hosts, models
from planner.cli import parse_ints
from planner.errors import PlannerInputError
from planner.policy import PolicyError, check_precision, load_policy
from planner.serving import ENGINES, ServeLayout, Workload, predict
from planner.serving_params import DESCRIBE, FITTED, ServingParams

MAX_POINTS = 64


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m planner predict",
                                description="Mean TPOT, TTFT and output tokens/s of one "
                                "serving instance, from the serving cost model.",
                                epilog="exit codes: 0 ok, 1 bad input, 2 usage")  # fmt: skip
    p.add_argument("--model", required=True, help="config.json path (or its directory) or "
                   "preset: " + ", ".join(models.MODEL_PRESETS))  # fmt: skip
    hosts.add_arguments(p, with_store=True, required=True)
    p.add_argument("--gpus", type=int, help="GPUs of the instance (default tp x dp)")
    p.add_argument("--tp", type=int, required=True, help="tensor-parallel size")
    p.add_argument("--dp", type=int, default=1, help="attention data-parallel size")
    p.add_argument("--ep", action="store_true", help="expert parallel for the MoE layers")
    p.add_argument("--isl", type=int, required=True, help="input tokens (1 = decode only)")
    p.add_argument("--osl", type=int, required=True, help="output tokens")
    p.add_argument("--concurrency", required=True, help="client concurrency, e.g. 1,8,64")
    p.add_argument("--engine", default="vllm", choices=ENGINES)
    p.add_argument("--kv-dtype", default="auto", choices=("auto", "fp8"))
    p.add_argument("--no-cuda-graphs", action="store_true", help="--enforce-eager")
    p.add_argument("--policy", help="policy file (default: the full-precision policy)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def layout_from(tp: int, dp: int, ep: bool, gpus: int | None) -> ServeLayout:
    if tp < 1 or dp < 1:
        raise PlannerInputError("--tp and --dp must be >= 1")
    if gpus is not None and gpus != tp * dp:
        raise PlannerInputError(f"--gpus {gpus}: one instance uses --tp x --dp = {tp * dp}")
    n = tp * dp
    return ServeLayout(tp=tp, dp=dp, moe_tp=1 if ep else n, moe_ep=n if ep else 1)


def run(args: argparse.Namespace, params: ServingParams = FITTED) -> dict[str, Any]:
    model = models.resolve(args.model)
    hw = hosts.from_args(args).hardware
    lay = layout_from(args.tp, args.dp, args.ep, args.gpus)
    if lay.gpus > hw.gpu_count and not hw.max_gpus:
        raise PlannerInputError(f"--tp {args.tp} --dp {args.dp} needs {lay.gpus} GPUs; host "
                                f"{hw.name!r} has {hw.gpu_count}")  # fmt: skip
    if lay.gpus > hw.gpu_count:
        hw = hardware.with_count(hw, lay.gpus)
    conc = parse_ints(args.concurrency, "--concurrency")
    if len(conc) > MAX_POINTS or min(conc) < 1 or max(conc) > 65536:
        raise PlannerInputError(f"--concurrency: 1-{MAX_POINTS} values between 1 and 65536")
    kv = "fp8_e4m3" if args.kv_dtype == "fp8" else ""
    w = Workload(args.isl, args.osl, args.engine, kv, not args.no_cuda_graphs)
    pr = predict(model, hw, lay, w, np.asarray(conc), params)
    try:
        pol = load_policy(args.policy)
    except PolicyError as exc:
        raise PlannerInputError(str(exc)) from None
    used = replace(model.native, kv_cache=kv or model.native.kv_cache)
    violations = check_precision(model.native, used, pol)
    points = [{"concurrency": int(c), "tpot_ms": round(float(pr.tpot_ms[i]), 3),
               "ttft_ms": round(float(pr.ttft_ms[i]), 2),
               "output_tok_s": round(float(pr.output_tok_s[i]), 1),
               "running_per_rank": int(pr.running[i]),
               "breakdown_ms": {k: round(float(np.broadcast_to(v, pr.tpot_ms.shape)[i]), 3)
                                for k, v in pr.breakdown_ms.items()}}
              for i, c in enumerate(conc)]  # fmt: skip
    return {
        "model": model.name, "host": hw.name, "gpu_model": hw.gpu_model, "gpus": lay.gpus,
        "engine": args.engine,
        "isl": args.isl, "osl": args.osl,
        "layout": {"tp": lay.tp, "dp": lay.dp, "ep": bool(args.ep), "moe_tp": lay.moe_tensor,
                   "moe_ep": lay.moe_ep, "name": lay.describe()},
        "policy": {"label": pol.label, "compliant": not violations,
                   "violations": [{"rule": v.rule_id, "sentence": v.sentence}
                                  for v in violations]},
        "weights_per_gpu_gb": round(pr.weights_per_gpu_gb, 2),
        "kv_capacity_seqs_per_rank": round(pr.kv_capacity_seqs, 1),
        "points": points,
        "assumptions": assumptions(model, hw, w, params),
    }  # fmt: skip


def assumptions(model, hw, w: Workload, p: ServingParams) -> list[dict[str, str]]:
    out = [
        {"what": "model", "value": f"{model.name}: {model.num_layers} layers, "
         f"{model.num_experts} experts top-{model.top_k}, {model.attention.upper()}, "
         f"weights {model.native.weights}, KV {w.kv_dtype or model.native.kv_cache}",
         "source": model.source},
        {"what": "host", "value": f"{hw.gpu_count}x {hw.gpu_model}, {hw.memory_bytes / 1e9:.0f} "
         f"GB, {hw.mem_bandwidth_gbps:.0f} GB/s, {hw.interconnect} {hw.link_gbps:.0f} GB/s",
         "source": hw.source},
        {"what": "workload", "value": f"random prompts {w.isl} in / {w.osl} out, about 10 x C "
         "requests; mean context during decode I + O/2; prefill interference C x I / O "
         "tokens per step", "source": "vllm bench serve --dataset-name random"},
        {"what": "CUDA graphs", "value": "on" if w.cuda_graphs else "off (eager)",
         "source": "engine default" if w.cuda_graphs else "--no-cuda-graphs"},
    ]  # fmt: skip
    for name, (what, src) in DESCRIBE.items():
        val = getattr(p, name)
        val = val.get(w.engine, val.get("vllm")) if isinstance(val, dict) else val
        out.append({"what": name, "value": f"{val:.4g} ({what})", "source": src +
                    (" on the Blackwell fixture, python -m planner.fit" if "fitted" in src
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
        lines.append(f"{p['concurrency']:>11} {p['tpot_ms']:>9.2f} {p['ttft_ms']:>9.1f} "
                     f"{p['output_tok_s']:>13.1f}")  # fmt: skip
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
