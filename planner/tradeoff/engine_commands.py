"""Which engine runs a layout, how to launch it there, and the command that measures it.

Pure: layout kind and sizes in, command strings out. Flags: vLLM ``vllm serve`` (``-tp``,
``-dp``, ``--enable-expert-parallel``, ``--all2all-backend``) and SGLang
``python -m sglang.launch_server`` (python/sglang/srt/server_args.py: ``--tp``, ``--dp``,
``--ep``, ``--enable-dp-attention``, ``--moe-a2a-backend deepep``,
``--deepep-dispatcher-output-dtype bf16`` so DeepEP's dispatch stays BF16 under the
full-precision policy). SGLang's DP attention splits its TP group: ``--tp n --dp n
--enable-dp-attention`` runs on n GPUs. TP attention + EP MoE at DP=1 is SGLang's alone.
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_PORT, SGLANG_PORT = 8000, 30000
SWEEP = "1,2,4,8,16,32,64"
# The flag that launches a server with a given token budget (planner --token-budget).
BUDGET_FLAG = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size"}


@dataclass(frozen=True)
class EngineCommand:
    engine: str  # vllm | sglang
    launch: str
    measure: str  # the collector command that benchmarks it (a concurrency sweep)
    profile: str  # the collector command that profiles it under load


def _sglang(model: str, flags: str) -> str:
    return f"python -m sglang.launch_server --model-path {model} {flags}".strip()


def _launches(kind: str, tp: int, dp: int, ep: int, model: str, a2a: str) -> dict[str, str]:
    n = tp * dp
    if kind == "tp":
        return {"vllm": f"vllm serve {model} -tp {tp}", "sglang": _sglang(model, f"--tp {tp}")}
    if kind == "tp_fast_allreduce":  # PCIe-only hosts (planner.tradeoff.layouts); REFERENCE §2
        return {"vllm": f"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1 vllm serve {model} -tp {tp}"}
    if kind == "tp_ep_dp1":
        return {"vllm": f"vllm serve {model} -tp {tp} --enable-expert-parallel",
                "sglang": _sglang(model, f"--tp {tp} --ep {tp}")}  # fmt: skip
    if kind == "tp_attn_ep_moe":
        return {"sglang": _sglang(model, f"--tp {tp} --ep {max(ep, tp)} --moe-a2a-backend deepep "
                                  "--deepep-dispatcher-output-dtype bf16")}  # fmt: skip
    if kind == "dp_attn_ep":
        vllm = f"vllm serve {model} -tp 1 -dp {n} --enable-expert-parallel"
        sgl = f"--tp {n} --dp {n} --enable-dp-attention --ep {n}"
        if a2a == "deepep_low_latency":
            vllm += " --all2all-backend deepep_low_latency"
            sgl += " --moe-a2a-backend deepep --deepep-dispatcher-output-dtype bf16"
        return {"vllm": vllm, "sglang": _sglang(model, sgl)}
    if kind == "tp_dp":
        return {"vllm": f"vllm serve {model} -tp {tp} -dp {dp}",
                "sglang": _sglang(model, f"--tp {tp} --dp {dp}")}  # fmt: skip
    return {}  # downcast variants: blocked by the policy, nothing to recommend


def commands(kind: str, tp: int, dp: int, ep: int, model: str = "MODEL", a2a: str = "",
             host: str = "HOST", token_budget: int = 0) -> list[EngineCommand]:  # fmt: skip
    """Every engine that runs this layout, vLLM first; launched with ``token_budget`` (the
    prediction's) when one was given."""
    out = []
    for engine, launch in _launches(kind, tp, dp, ep, model, a2a).items():
        if token_budget:
            launch += f" {BUDGET_FLAG[engine]} {token_budget}"
        port = VLLM_PORT if engine == "vllm" else SGLANG_PORT
        args = launch.split(model, 1)[1].strip() if model in launch else launch
        url = f"http://{host}:{port}"
        measure = (f"python -m collectors {engine}-bench --url {url} --concurrency {SWEEP} "
                   f"--server-args \"{args}\"")  # fmt: skip
        profile = (f"python -m collectors {engine}-profile --url {url} --trace-dir TRACE_DIR "
                   f"--server-args \"{args}\"")  # fmt: skip
        out.append(EngineCommand(engine, launch, measure, profile))
    return out


def engines(kind: str) -> list[str]:
    return [c.engine for c in commands(kind, 2, 1, 2)]


def sglang_only_lines(layouts, model: str = "MODEL") -> list[str]:
    """Markdown lines for layouts only SGLang runs: how to launch and measure each.

    ``layouts`` are planner Layouts or LayoutResults (anything with ``.layout`` or the
    Layout fields ``name, kind, tp, dp, ep, a2a_backend``)."""
    lines = []
    for item in layouts:
        lay = getattr(item, "layout", item)
        cmds = commands(lay.kind, lay.tp, lay.dp, lay.ep, model, lay.a2a_backend)
        if [c.engine for c in cmds] != ["sglang"]:
            continue
        c = cmds[0]
        lines.append(f"**{lay.name}** runs on SGLang only (vLLM has no such layout): launch "
                     f"`{c.launch}`, then measure it with `{c.measure}` (or profile it with "
                     f"`{c.profile}`).")  # fmt: skip
    return lines
