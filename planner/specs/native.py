"""A checkpoint's native precision: from an HF ``config.json`` or a short ``--native`` hint.

Native = weights as shipped, activations and KV cache in the model dtype unless the
checkpoint ships activation / KV quantization, AllReduce in the activation dtype, MoE
dispatch in FP8 only where the expert GEMMs consume FP8 (FP8 block-quantized checkpoints).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner.errors import PlannerInputError
from planner.specs.precision import COMPONENTS, Precision, UnknownDtype, normalize_dtype


class NativeError(PlannerInputError):
    """The native precision could not be determined; the message is one line."""


# Short names for --native: the checkpoint kinds of REFERENCE §4 and plain dtypes.
_W4A16 = Precision("int4", "bf16", "bf16", "bf16")
_FP8_BLOCK = Precision("fp8_e4m3", "bf16", "bf16", "bf16", dispatch="fp8_e4m3")
HINTS: dict[str, Precision] = {
    "bf16": Precision("bf16", "bf16", "bf16", "bf16"),
    "fp16": Precision("fp16", "fp16", "fp16", "fp16"),
    "int4": _W4A16,
    "w4a16": _W4A16,
    "fp8-block": _FP8_BLOCK,
    "kimi-k2.5": _W4A16,
    "kimi-k2": _W4A16,
    "deepseek-v3": _FP8_BLOCK,
    "minimax-m2.5": _FP8_BLOCK,
}
_KEYS = {"w": "weights", "a": "activations", "kv": "kv_cache", "comm": "communication"}


def parse_hint(text: str) -> Precision:
    """``int4`` | ``fp8-block`` | ``deepseek-v3`` | ``weights=int4,kv_cache=bf16,...``.

    Component keys may be abbreviated (w, a, kv, comm); unspecified ones default to bf16
    (dispatch defaults to the communication dtype).
    """
    key = text.strip().lower()
    if key in HINTS:
        return HINTS[key]
    if "=" not in key:
        raise NativeError(
            f"--native {text!r}: not a known checkpoint kind ({', '.join(HINTS)}) "
            "nor a list like weights=int4,kv_cache=bf16"
        )
    values = {"weights": "bf16", "activations": "bf16", "kv_cache": "bf16",
              "communication": "bf16", "dispatch": ""}  # fmt: skip
    for part in key.split(","):
        name, _, dtype = part.partition("=")
        name = _KEYS.get(name.strip(), name.strip())
        if name not in COMPONENTS:
            raise NativeError(f"--native: unknown component {name!r} ({', '.join(COMPONENTS)})")
        try:
            values[name] = normalize_dtype(dtype)
        except UnknownDtype as exc:
            raise NativeError(f"--native: {exc}") from None
    return Precision(**values)


def _dtype(value: Any, default: str = "bf16") -> str:
    try:
        return normalize_dtype(str(value)) if value else default
    except UnknownDtype:
        return default


def _ct_scheme(q: dict[str, Any]) -> tuple[str, str]:
    """compressed-tensors: (weights, activations) of the first config group."""
    for group in (q.get("config_groups") or {}).values():
        w, a = group.get("weights") or {}, group.get("input_activations")
        bits, kind = int(w.get("num_bits", 16)), str(w.get("type", "int"))
        weights = {4: "int4", 8: "int8"}.get(bits, "bf16") if kind == "int" else (
            "nvfp4" if bits == 4 else "fp8_e4m3" if bits == 8 else "bf16")  # fmt: skip
        acts = ""
        if a:
            abits, akind = int(a.get("num_bits", 16)), str(a.get("type", "float"))
            acts = ("fp8_e4m3" if akind == "float" else "int8") if abits == 8 else (
                "nvfp4" if abits == 4 else "")  # fmt: skip
        return weights, acts
    raise NativeError("compressed-tensors quantization_config has no config_groups")


def from_hf_config(config: dict[str, Any]) -> Precision:
    """Native precision from an HF config dict (``quantization_config`` and torch dtype)."""
    if not isinstance(config, dict) or not (
        "model_type" in config or "hidden_size" in config or "text_config" in config
    ):
        raise NativeError("not a transformer config.json (no model_type / hidden_size)")
    inner = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    model = _dtype(config.get("torch_dtype") or config.get("dtype") or inner.get("torch_dtype"))
    q = config.get("quantization_config") or inner.get("quantization_config")
    if not q:
        return Precision(model, model, model, model)
    method = str(q.get("quant_method", "")).lower()
    acts, kv, dispatch = model, model, ""
    if method == "fp8":
        weights = _dtype(q.get("fmt") or "e4m3", "fp8_e4m3")
        if q.get("weight_block_size"):
            dispatch = weights  # block-FP8 expert GEMMs take FP8 inputs: FP8 dispatch is native
    elif method == "compressed-tensors":
        weights, a = _ct_scheme(q)
        if a:
            acts, dispatch = a, a
        if q.get("kv_cache_scheme"):
            kv = "fp8_e4m3" if q["kv_cache_scheme"].get("type", "float") == "float" else "int8"
    elif method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "moe_wna16", "auto-round"):
        weights = {4: "int4", 8: "int8"}.get(int(q.get("bits", q.get("w_bit", 4))), "int4")
    elif method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        weights = "nvfp4" if "FP4" in algo else "fp8_e4m3" if "FP8" in algo else ""
        if not weights:
            raise NativeError(f"unknown modelopt quant_algo {algo!r}")
        acts = dispatch = weights
        if q.get("kv_cache_quant_algo") or q.get("kv_cache_scheme"):
            kv = "fp8_e4m3"
    elif method == "mxfp4":
        weights = "mxfp4"
    elif method == "bitsandbytes":
        weights = "int4" if q.get("load_in_4bit") else "int8"
    else:
        raise NativeError(f"unknown quantization method {method!r} in quantization_config")
    return Precision(weights, acts, kv, model, dispatch)


def load_config(path: str | Path) -> Precision:
    """Native precision from a config.json file; NativeError with a one-line reason."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NativeError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NativeError(f"{p}: not JSON ({exc})") from None
    try:
        return from_hf_config(data)
    except NativeError as exc:
        raise NativeError(f"{p}: {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise NativeError(f"{p}: malformed quantization_config ({exc})") from None
