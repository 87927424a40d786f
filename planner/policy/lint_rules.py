"""Detectors: what each vLLM / SGLang flag and env var does to precision (REFERENCE §3).

A detector only says which component a setting changes and to which dtype; whether that
breaks the policy is decided by :func:`planner.policy.check.check_precision` against the
checkpoint's native precision, the same checker the calculator and the trace checks use.
"""

from __future__ import annotations

from dataclasses import asdict

from planner.policy.lint_detect import Detect, Finding
from planner.policy.lint_sglang import sglang_quant
from planner.specs.launch_parse import Command, Parsed, Setting
from planner.specs.precision import UnknownDtype, normalize_dtype, precision_rank

ENV_VARS = (
    "VLLM_MARLIN_INPUT_DTYPE", "VLLM_TEST_FORCE_FP8_MARLIN",
    "VLLM_FLASHINFER_MOE_A2A_LOW_PRECISION_COMBINE", "VLLM_DEEPEPLL_NVFP4_DISPATCH",
    "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16",
    "SGLANG_ROCM_QUICK_REDUCE_QUANTIZATION", "ROCM_QUICK_REDUCE_QUANTIZATION",
    "SGLANG_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16",
    "SGLANG_DEEPEP_BF16_DISPATCH", "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC",
    "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE",
)  # fmt: skip
FLAGS = (
    "--kv-cache-dtype", "--quantization", "--dtype", "--moe-a2a-backend", "--enable-deepep-moe",
    "--deepep-dispatcher-output-dtype", "--enable-expert-parallel", "--torchao-config",
    "--modelopt-quant", "--flashinfer-mxfp4-moe-precision",
)  # fmt: skip
# --quantization values that quantize a higher-precision checkpoint at load time, and those
# that only name the checkpoint's own format (no re-quantization).
ONLINE_QUANT = {
    "fp8": "fp8_e4m3", "ptpc_fp8": "fp8_e4m3", "fbgemm_fp8": "fp8_e4m3", "w8a8_fp8": "fp8_e4m3",
    "experts_int8": "int8", "w8a8_int8": "int8", "blockwise_int8": "int8",
    "bitsandbytes": "int4",
}  # fmt: skip
FORMAT_QUANT = {
    "awq", "awq_marlin", "gptq", "gptq_marlin", "gptq_marlin_24", "marlin", "compressed-tensors",
    "compressed_tensors", "modelopt", "modelopt_fp4", "modelopt_mixed", "gguf", "moe_wna16",
    "quark", "inc", "auto-round", "mxfp4", "petit_nvfp4", "awq_triton", "w4afp8",
}  # fmt: skip
_TRUE = {"1", "true", "yes", "on"}


def _where(s: Setting) -> str:
    return f"{s.name}={s.value}"


def check_env(d: Detect, env: dict[str, Setting]) -> None:
    for name, s in env.items():
        d.cur_file = s.file
        _check_setting(d, env, name, s)
    d.cur_file = ""


def _check_setting(d: Detect, env: dict[str, Setting], name: str, s: Setting) -> None:
    value, where = s.value.strip(), _where(s)
    truthy = value.lower() in _TRUE
    if name == "VLLM_MARLIN_INPUT_DTYPE" and value.lower() not in ("", "bf16", "bfloat16"):
        try:
            d.check("activations", value, s.line, where, "W4A16 Marlin GEMMs take quantized "
                    f"{value} inputs (W4A8)")  # fmt: skip
        except UnknownDtype:
            d.review("activations", s.line, where, f"unknown Marlin input dtype {value!r}")
    elif name == "VLLM_TEST_FORCE_FP8_MARLIN" and truthy:
        d.always("weights", s.line, where, "forces the FP8 Marlin path whatever the hardware "
                 "supports; the policy checklist counts it as a downcast")  # fmt: skip
    elif name == "VLLM_FLASHINFER_MOE_A2A_LOW_PRECISION_COMBINE" and truthy:
        d.check("communication", "fp8_e4m3", s.line, where,
                "MoE combine payloads are sent in FP8")  # fmt: skip
    elif name == "VLLM_DEEPEPLL_NVFP4_DISPATCH" and truthy:
        d.check("dispatch", "nvfp4", s.line, where, "DeepEP low-latency dispatch in NVFP4")
    elif name.endswith("ROCM_QUICK_REDUCE_QUANTIZATION"):
        _quick_reduce(d, env, s)
    elif name.endswith(("PCIE_IPC_ALLREDUCE", "FLASHINFER_PCIE_IPC")) and truthy:
        d.add("note", "", s.line, where, "Allowed: a faster full-precision AllReduce.",
              "PCIe-IPC AllReduce keeps the activation dtype")  # fmt: skip


def _quick_reduce(d: Detect, env: dict[str, Setting], s: Setting) -> None:
    mode = s.value.strip().upper()
    prefix = s.name[: -len("QUANTIZATION")]
    cast_s = env.get(prefix + "CAST_BF16_TO_FP16")
    cast = cast_s is None or cast_s.value.strip().lower() in _TRUE  # default on
    if mode in ("", "NONE"):
        if cast_s is not None and cast:
            d.add("note", "", cast_s.line, _where(cast_s), "No effect on its own.",
                  "the BF16->FP16 cast applies only while quick reduce is on")  # fmt: skip
        return
    if mode in ("INT8", "INT6", "INT4", "INT3"):
        why = f"quick-reduce AllReduce quantized to {mode}" + (" after a BF16->FP16 cast"
                                                              if cast else "")  # fmt: skip
        d.check("communication", mode.lower(), s.line, _where(s), why)
    elif mode == "FP":
        if cast:
            where = (
                _where(cast_s) if cast_s else f"{_where(s)} ({prefix}CAST_BF16_TO_FP16 default on)"
            )
            d.check("communication", "fp16", cast_s.line if cast_s else s.line, where,
                    "BF16 AllReduce payloads are cast to FP16")  # fmt: skip
    else:
        d.review("communication", s.line, _where(s), f"unknown quick-reduce mode {mode!r}")


def check_command(d: Detect, cmd: Command, env: dict[str, Setting]) -> None:
    """Flags of one launch command (vLLM or SGLang)."""
    for arg in cmd.args:
        value = (arg.value or "").strip()
        low = value.lower()
        if "$" in value:
            d.review(_component(arg.flag), arg.line, arg.text,
                     f"value comes from {value}, which this file does not set")  # fmt: skip
            continue
        if arg.flag == "--kv-cache-dtype" and low not in ("", "auto"):
            _kv(d, arg.line, arg.text, low)
        elif arg.flag == "--quantization" and low:
            _quantization(d, arg.line, arg.text, low)
        elif arg.flag == "--dtype" and low not in ("", "auto"):
            _dtype(d, arg.line, arg.text, low)
    _deepep(d, cmd, env)
    sglang_quant(d, cmd)
    ep = cmd.get("--enable-expert-parallel")
    dp = cmd.get("--data-parallel-size")
    if cmd.engine == "vllm" and ep and (dp is None or (dp.value or "1").strip() == "1"):
        d.add("note", "", ep.line, ep.text, "Layout note (not a precision issue).",
              "in vLLM, TP+EP with DP=1 removes no AllReduce: all-to-all runs only when DP>1")  # fmt: skip


def _component(flag: str) -> str:
    return {"--kv-cache-dtype": "kv_cache", "--quantization": "weights", "--dtype": "activations"
            }.get(flag, "dispatch")  # fmt: skip


def _kv(d: Detect, line: int, where: str, value: str) -> None:
    try:
        rank = precision_rank(value)
    except UnknownDtype:
        d.review("kv_cache", line, where, f"unknown KV-cache dtype {value!r}")
        return
    if rank == 3 and d.native is None and normalize_dtype(value) == "fp16":
        d.review("kv_cache", line, where, "FP16 KV cache is a cast if the model dtype is BF16")
    elif rank < 3 or d.native is not None:
        d.check("kv_cache", value, line, where, f"KV cache stored as {value}")


def _quantization(d: Detect, line: int, where: str, method: str) -> None:
    if method in FORMAT_QUANT:
        d.add("note", "", line, where, "Loads the checkpoint's own quantized format.",
              "no re-quantization, as long as the checkpoint ships this format")  # fmt: skip
    elif method not in ONLINE_QUANT:
        d.review("weights", line, where, f"unknown quantization method {method!r}")
    elif d.native is None or not d.native.weights:
        d.review("weights", line, where, f"--quantization {method} re-quantizes a 16-bit "
                 f"checkpoint to {ONLINE_QUANT[method]} but only selects the format of a "
                 "checkpoint that already ships it; give --model-config or --native")  # fmt: skip
    else:
        before = len(d.findings)
        d.check("weights", ONLINE_QUANT[method], line, where,
                f"weights quantized to {ONLINE_QUANT[method]} at load time")  # fmt: skip
        quantized = precision_rank(d.native.weights) < 3
        if len(d.findings) == before and quantized and normalize_dtype(
            ONLINE_QUANT[method]) != d.native.weights:  # fmt: skip
            d.add("note", "", line, where, "Does not match the checkpoint's format.",
                  f"the checkpoint ships {d.native.weights} weights; engines refuse a "
                  "--quantization that differs from its quant_method")  # fmt: skip


def _dtype(d: Detect, line: int, where: str, value: str) -> None:
    try:
        dtype = normalize_dtype(value)
    except UnknownDtype:
        d.review("activations", line, where, f"unknown --dtype {value!r}")
        return
    if d.native is None:
        if dtype == "fp16":
            d.review("activations", line, where, "--dtype float16 casts a BF16 model")
        return
    d.check("activations", dtype, line, where, f"model run in {dtype}")


def _deepep(d: Detect, cmd: Command, env: dict[str, Setting]) -> None:
    """SGLang DeepEP: dispatch is FP8 unless --deepep-dispatcher-output-dtype bf16."""
    backend = cmd.get("--moe-a2a-backend")
    if backend is not None and (backend.value or "").lower() != "deepep":
        backend = None
    uses = backend or cmd.get("--enable-deepep-moe")
    out = cmd.get("--deepep-dispatcher-output-dtype")
    value = (out.value or "auto").lower() if out else "auto"
    if not uses and value == "auto":
        return
    if value == "auto":
        bf16_env = env.get("SGLANG_DEEPEP_BF16_DISPATCH")
        if bf16_env and bf16_env.value.strip().lower() in _TRUE:
            return
        assert uses is not None
        d.check("dispatch", "fp8_e4m3", uses.line, uses.text, "SGLang DeepEP dispatch "
                "defaults to FP8 (add --deepep-dispatcher-output-dtype bf16)")  # fmt: skip
    elif value not in ("bf16", "bfloat16"):
        assert out is not None
        try:
            d.check("dispatch", value, out.line, out.text, f"DeepEP dispatch in {value}")
        except UnknownDtype:
            d.review("dispatch", out.line, out.text, f"unknown dispatcher dtype {value!r}")


def detect(parsed: Parsed, d: Detect, extra_env: list[Setting] | None = None) -> None:
    """Run every detector over a parsed file; the last assignment of a name wins."""
    env: dict[str, Setting] = {}
    for s in [*(extra_env or []), *parsed.env]:
        env[s.name] = s
    check_env(d, env)
    for cmd in parsed.commands:
        check_command(d, cmd, env)
    names = (*ENV_VARS, *FLAGS)
    for line, text in parsed.comments:
        if any(n in text for n in names):
            d.add("note", "", line, "# " + text, "Commented out: not in effect.",
                  "mentions a precision setting")  # fmt: skip
    for line, path in parsed.env_files:
        d.add("note", "", line, f"EnvironmentFile={path}", "Referenced, not read.",
              f"lint it too, or pass --env-file {path}")  # fmt: skip
    for line, problem in parsed.problems:
        d.add("note", "", line, "", "Parse note.", problem)


def as_dict(f: Finding) -> dict:
    return asdict(f)
