"""SGLang-only launch flags that change precision (detectors used by planner/policy/lint_rules.py).

Flags from python/sglang/srt/server_args.py (sgl-project/sglang).
"""

from __future__ import annotations

from planner.policy.lint_detect import Detect
from planner.specs.launch_parse import Command

# SGLang load-time quantization (python/sglang/srt/server_args.py, sgl-project/sglang):
# --torchao-config int8dq | int8wo | int4wo-<group> | fp8wo | fp8dq-per_tensor | fp8dq-per_row
# ("wo" = weight-only, "dq" = weights and dynamically quantized activations) and
# --modelopt-quant fp8 | int4_awq | w4a8_awq | nvfp4 | nvfp4_awq (NVIDIA ModelOpt).
# Each maps to (weights dtype, activations dtype or None).
TORCHAO = {"int8dq": ("int8", "int8"), "int8wo": ("int8", None), "int4wo": ("int4", None),
           "fp8wo": ("fp8_e4m3", None), "fp8dq": ("fp8_e4m3", "fp8_e4m3")}  # fmt: skip
MODELOPT = {"fp8": ("fp8_e4m3", "fp8_e4m3"), "int4_awq": ("int4", None),
            "w4a8_awq": ("int4", "fp8_e4m3"), "nvfp4": ("nvfp4", "nvfp4"),
            "nvfp4_awq": ("nvfp4", "nvfp4")}  # fmt: skip


def sglang_quant(d: Detect, cmd: Command) -> None:
    """SGLang's own load-time quantization flags and the MXFP4 MoE activation precision."""
    for flag, table in (("--torchao-config", TORCHAO), ("--modelopt-quant", MODELOPT)):
        arg = cmd.get(flag)
        if arg is None or not (arg.value or "").strip() or "$" in (arg.value or ""):
            continue
        value = arg.value.strip().lower()
        key = value.split("-")[0] if flag == "--torchao-config" else value
        if key not in table:
            d.review("weights", arg.line, arg.text, f"unknown {flag} value {value!r}")
            continue
        weights, acts = table[key]
        d.check("weights", weights, arg.line, arg.text,
                f"SGLang quantizes the weights to {weights} at load time")  # fmt: skip
        if acts:
            d.check("activations", acts, arg.line, arg.text,
                    f"and quantizes GEMM inputs to {acts}")  # fmt: skip
    runner = cmd.get("--moe-runner-backend")
    prec = cmd.get("--flashinfer-mxfp4-moe-precision")
    if runner is not None and (runner.value or "").strip().lower() == "flashinfer_mxfp4":
        value = ((prec.value if prec else None) or "default").strip().lower()
        if value != "bf16":
            where = prec or runner
            d.check("activations", "fp8_e4m3", where.line, where.text,
                    "flashinfer_mxfp4 MoE quantizes its activations to MXFP8 unless "
                    "--flashinfer-mxfp4-moe-precision bf16")  # fmt: skip
