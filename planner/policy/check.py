"""Precision policy: a versioned rules file and the one checker every surface uses.

The calculator (layouts), the linter (launch commands, units, env files) and the trace
checks (stored runs) all reduce what they see to a :class:`Precision` ("what is used") and
call :func:`check_precision` against the checkpoint's native :class:`Precision`. The rules
file says which components must stay at native precision and how strictly.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerInputError
from planner.specs.precision import (
    COMPONENTS,
    DTYPES,
    UNCHANGED,
    Precision,
    UnknownDtype,
    compare_dtypes,
    is_lower,
    normalize_dtype,
    precision_rank,
)

RULE_KINDS: dict[str, str] = {
    "keep_native": "the component's dtype must not be of lower precision than the checkpoint's",
    "no_cast": "the component's dtype must equal the checkpoint's (or be strictly more precise)",
}
DEFAULT_POLICY = Path(__file__).resolve().parent / "policies" / "full-precision.toml"


class PolicyError(PlannerInputError):
    """A policy file that cannot be used; the message is one line naming file and rule."""


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
