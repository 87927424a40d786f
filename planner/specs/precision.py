"""Dtypes and the precision of a deployment or a checkpoint: the ladder every check uses.

A :class:`Precision` names the dtype of each component (weights, activations, KV cache,
communication, dispatch); the policy (planner.policy.check) compares a used one with the
checkpoint's native one. Specs, layouts and the linter share this type.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# Canonical dtype names with their precision rank (higher = more precise). Names of equal
# rank are "the same precision class" but a change between them is still a cast.
_RANK: dict[str, int] = {
    "fp32": 4,
    "bf16": 3,
    "fp16": 3,
    "fp8_e4m3": 2,
    "fp8_e5m2": 2,
    "int8": 2,
    "nvfp4": 1,
    "mxfp4": 1,
    "int4": 1,
    # Sub-8-bit formats seen in quantized AllReduce / KV-cache options.
    "int6": 1,
    "fp6": 1,
    "int3": 1,
}
DTYPES: tuple[str, ...] = tuple(_RANK)

_ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32", "fp32": "fp32", "tf32": "fp32",
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16", "fp16": "fp16",
    "fp8": "fp8_e4m3", "e4m3": "fp8_e4m3", "f8e4m3": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2", "f8e5m2": "fp8_e5m2", "fp8_e5m2": "fp8_e5m2",
    "int8": "int8", "i8": "int8", "s8": "int8", "w8a8": "int8",
    "int4": "int4", "i4": "int4", "uint4": "int4", "w4a16": "int4", "int4b8": "int4",
    "nvfp4": "nvfp4", "fp4": "nvfp4", "e2m1": "nvfp4", "float4_e2m1fn_x2": "nvfp4",
    "mxfp4": "mxfp4",
    "int6": "int6", "fp6": "fp6", "int3": "int3",
}  # fmt: skip

COMPONENTS: tuple[str, ...] = ("weights", "activations", "kv_cache", "communication", "dispatch")
class UnknownDtype(ValueError):
    """A dtype name that cannot be placed on the precision ladder."""


def normalize_dtype(name: str) -> str:
    """Canonical dtype name: 'bfloat16' -> 'bf16', 'float8_e4m3fn' -> 'fp8_e4m3', 'fp8' -> ...

    Raises UnknownDtype for names off the ladder (including 'auto', which callers resolve).
    """
    raw = str(name).strip().lower().replace("-", "_")
    raw = raw.removeprefix("torch.")
    if raw in _ALIASES:
        return _ALIASES[raw]
    # Family prefixes: float8_e4m3fn(uz), fp8_ds_mla, fp8_inc, nvfp4_*, int8_per_token_head ...
    if raw.startswith(("fp8", "float8", "f8")):
        return "fp8_e5m2" if "e5m2" in raw else "fp8_e4m3"
    if raw.startswith(("nvfp4", "float4", "fp4")):
        return "nvfp4"
    if raw.startswith("mxfp4"):
        return "mxfp4"
    if raw.startswith("int8"):
        return "int8"
    if raw.startswith("int4"):
        return "int4"
    if raw.startswith("turboquant"):
        return "int4"  # TurboQuant KV cache: sub-8-bit codes
    raise UnknownDtype(f"unknown dtype {name!r} (known: {', '.join(DTYPES)})")


def precision_rank(name: str) -> int:
    """Higher is more precise: fp32 4, bf16/fp16 3, 8-bit 2, sub-8-bit 1."""
    return _RANK[normalize_dtype(name)]


def compare_dtypes(a: str, b: str) -> int:
    """-1 if a is less precise than b, 0 if the same class, 1 if more precise."""
    ra, rb = precision_rank(a), precision_rank(b)
    return (ra > rb) - (ra < rb)


def is_lower(used: str, native: str) -> bool:
    return compare_dtypes(used, native) < 0


@dataclass(frozen=True)
class Precision:
    """Dtypes of one deployment (what is used) or of a checkpoint (what it ships natively).

    ``communication`` is the AllReduce / combine payload dtype; ``dispatch`` is the MoE
    dispatch payload dtype, which differs for FP8 block-quantized checkpoints whose expert
    GEMMs consume FP8 (native FP8 dispatch). Empty ``dispatch`` = same as communication.
    An empty field in a *used* precision means "unchanged from native".
    """

    weights: str
    activations: str
    kv_cache: str
    communication: str
    dispatch: str = ""

    def get(self, component: str) -> str:
        if component == "dispatch":
            return self.dispatch or self.communication
        if component not in COMPONENTS:
            raise KeyError(component)
        return getattr(self, component)

    def with_(self, **changes: str) -> Precision:
        return replace(self, **changes)


# What "unchanged" looks like: the checker compares only the fields a caller fills in.
UNCHANGED = Precision(weights="", activations="", kv_cache="", communication="", dispatch="")
