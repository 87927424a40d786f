"""Precision policy: a versioned rules file and the one checker every surface uses.

The calculator (layouts), the linter (launch commands, units, env files) and the trace
checks (stored runs) all reduce what they see to a :class:`Precision` ("what is used") and
call :func:`check_precision` against the checkpoint's native :class:`Precision`. The rules
file says which components must stay at native precision and how strictly.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from planner.errors import PlannerInputError

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
RULE_KINDS: dict[str, str] = {
    "keep_native": "the component's dtype must not be of lower precision than the checkpoint's",
    "no_cast": "the component's dtype must equal the checkpoint's (or be strictly more precise)",
}
DEFAULT_POLICY = Path(__file__).resolve().parent / "policies" / "full-precision.toml"


class UnknownDtype(ValueError):
    """A dtype name that cannot be placed on the precision ladder."""


class PolicyError(PlannerInputError):
    """A policy file that cannot be used; the message is one line naming file and rule."""


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


@dataclass(frozen=True)
class Violation:
    rule_id: str
    sentence: str
    detail: str
    component: str = ""


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # one of RULE_KINDS
    component: str  # one of COMPONENTS
    sentence: str
    rationale: str
    examples: tuple[str, ...] = ()

    def violated_by(self, native: str, used: str) -> bool:
        if not used or not native or used.lower() == "auto":
            return False
        if self.kind == "keep_native":
            return is_lower(used, native)
        # no_cast: any change that is not an upcast is a cast (bf16 -> fp16 counts).
        cmp = compare_dtypes(used, native)
        return cmp < 0 or (cmp == 0 and normalize_dtype(used) != normalize_dtype(native))


@dataclass(frozen=True)
class Policy:
    name: str
    version: str
    rules: tuple[Rule, ...]
    description: str = ""
    path: str = ""

    def rule(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    def rules_for(self, component: str) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.component == component)

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


def check_precision(native: Precision, used: Precision, policy: Policy) -> list[Violation]:
    """Every rule of ``policy`` that ``used`` breaks relative to the checkpoint's ``native``.

    Empty fields of ``used`` are treated as unchanged. Unknown dtype names raise
    UnknownDtype (callers turn that into a one-line message).
    """
    out: list[Violation] = []
    for rule in policy.rules:
        nat, use = native.get(rule.component), used.get(rule.component)
        if rule.violated_by(nat, use):
            detail = (
                f"{rule.component}: {normalize_dtype(use)} used, "
                f"checkpoint ships {normalize_dtype(nat)}"
            )
            out.append(Violation(rule.id, rule.sentence, detail, rule.component))
    return out


def _fail(path: str, what: str) -> PolicyError:
    return PolicyError(f"{path}: {what}")


def _parse_rule(path: str, index: int, raw: object) -> Rule:
    if not isinstance(raw, dict):
        raise _fail(path, f"rule #{index + 1} is not a table")
    rid = str(raw.get("id") or f"#{index + 1}")
    where = f"rule {rid!r}"
    for key in ("id", "kind", "component", "sentence", "rationale"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _fail(path, f"{where}: missing or empty {key!r}")
    if raw["kind"] not in RULE_KINDS:
        raise _fail(
            path, f"{where}: unknown rule kind {raw['kind']!r} (known: {', '.join(RULE_KINDS)})"
        )
    if raw["component"] not in COMPONENTS:
        raise _fail(
            path,
            f"{where}: unknown component {raw['component']!r} (known: {', '.join(COMPONENTS)})",
        )
    unknown = set(raw) - {"id", "kind", "component", "sentence", "rationale", "examples"}
    if unknown:
        raise _fail(path, f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    examples = raw.get("examples", [])
    if not isinstance(examples, list) or not all(isinstance(e, str) for e in examples):
        raise _fail(path, f"{where}: 'examples' must be a list of strings")
    return Rule(
        id=raw["id"].strip(),
        kind=raw["kind"],
        component=raw["component"],
        sentence=" ".join(raw["sentence"].split()),
        rationale=" ".join(raw["rationale"].split()),
        examples=tuple(examples),
    )


def parse_policy(text: str, path: str = "<policy>") -> Policy:
    """Parse policy TOML text; raises PolicyError with a one-line message on any problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, f"not valid TOML ({exc})") from None
    for key in ("name", "version"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise _fail(path, f"missing or empty top-level {key!r}")
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list) or not raw_rules:
        raise _fail(path, "no [[rule]] tables")
    rules = tuple(_parse_rule(path, i, r) for i, r in enumerate(raw_rules))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise _fail(path, f"rule {rule.id!r}: duplicate id")
        seen.add(rule.id)
    return Policy(
        name=data["name"].strip(),
        version=data["version"].strip(),
        rules=rules,
        description=" ".join(str(data.get("description", "")).split()),
        path=path,
    )


def load_policy(path: str | Path | None = None) -> Policy:
    """Load a policy file (default: the shipped full-precision policy)."""
    p = Path(path) if path is not None else DEFAULT_POLICY
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise _fail(str(p), f"cannot read policy file ({reason})") from None
    return parse_policy(text, str(p))


__all__ = [
    "COMPONENTS",
    "DEFAULT_POLICY",
    "DTYPES",
    "RULE_KINDS",
    "UNCHANGED",
    "Policy",
    "PolicyError",
    "Precision",
    "Rule",
    "UnknownDtype",
    "Violation",
    "check_precision",
    "compare_dtypes",
    "is_lower",
    "load_policy",
    "normalize_dtype",
    "parse_policy",
    "precision_rank",
]
