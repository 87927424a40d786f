"""``python -m planner lint FILE``: check a launch command, systemd unit or env file against
the precision policy. Nothing in the file is executed; referenced files are not opened.

Exit codes: 0 compliant (notes and "needs review" findings allowed unless --strict),
1 policy violations, 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from planner.policy.check import Policy, PolicyError, load_policy
from planner.policy.lint_detect import Detect, Finding
from planner.policy.lint_rules import ENV_VARS, FLAGS, detect
from planner.specs.launch_parse import Setting, parse_text
from planner.specs.native import NativeError, load_config, parse_hint
from planner.specs.precision import Precision, UnknownDtype

MAX_BYTES = 1 << 20  # a launch file is a few KiB; anything this big is not one
EXIT_OK, EXIT_VIOLATIONS, EXIT_USAGE = 0, 1, 2
_ORDER = {"violation": 0, "review": 1, "note": 2}


@dataclass
class LintResult:
    name: str
    kind: str  # "systemd", "env", "shell"
    policy: Policy
    native: Precision | None
    native_source: str
    findings: list[Finding]

    def count(self, level: str) -> int:
        return sum(f.level == level for f in self.findings)

    @property
    def compliant(self) -> bool:
        return self.count("violation") == 0

    @property
    def verdict(self) -> str:
        v, r, n = self.count("violation"), self.count("review"), self.count("note")
        tail = f"{v} violation(s), {r} need(s) review, {n} note(s)"
        if v:
            return f"NOT COMPLIANT with {self.policy.label}: {tail}"
        if r:
            return f"compliant with {self.policy.label} pending review: {tail}"
        return f"compliant with {self.policy.label}: {tail}"

    def lines(self) -> list[str]:
        """One line per finding: ``FILE:LINE: level rule-id where: sentence (detail)``."""
        out = []
        for f in self.findings:
            rule = f" {f.rule_id}" if f.rule_id else ""
            where = f" {f.where}:" if f.where else ""
            out.append(f"{f.file}:{f.line}: {f.level}{rule}{where} {f.sentence} ({f.detail})")
        return out

    def to_dict(self) -> dict:
        return {
            "file": self.name,
            "kind": self.kind,
            "policy": {"name": self.policy.name, "version": self.policy.version},
            "native": asdict(self.native) if self.native else None,
            "native_source": self.native_source,
            "compliant": self.compliant,
            "verdict": self.verdict,
            "counts": {k: self.count(k) for k in _ORDER},
            "findings": [asdict(f) for f in self.findings],
        }


def lint_text(
    text: str,
    policy: Policy | None = None,
    native: Precision | None = None,
    name: str = "<text>",
    env_files: list[tuple[str, str]] | None = None,
    native_source: str = "",
) -> LintResult:
    """Lint launch text. ``env_files`` = [(name, text)] whose assignments apply first
    (what a unit's EnvironmentFile= would load). Pure: no I/O, nothing executed."""
    policy = policy or load_policy()
    extra: list[Setting] = []
    for env_name, env_text in env_files or []:
        parsed_env = parse_text(env_text, ENV_VARS)
        extra += [Setting(s.name, s.value, s.line, s.source, env_name) for s in parsed_env.env]
    parsed = parse_text(text, ENV_VARS, [f.lstrip("-") for f in FLAGS])
    d = Detect(policy, native, name)
    detect(parsed, d, extra)
    if not parsed.commands and not parsed.env and not extra:
        d.add("note", "", 1, "", "Nothing to check.",
              "no launch command, unit or env assignment recognised")  # fmt: skip
    findings = sorted(d.findings, key=lambda f: (_ORDER[f.level], f.file != name, f.line))
    source = native_source or ("given" if native else "assumed BF16, no KV quantization")
    return LintResult(name, parsed.kind, policy, native, source, findings)


def read_text(path: str) -> str:
    """File text for linting; ValueError with a one-line reason when unusable."""
    if path == "-":
        return sys.stdin.read(MAX_BYTES + 1)[:MAX_BYTES]
    p = Path(path)
    try:
        if p.is_dir():
            raise ValueError(f"{path}: is a directory, not a file")
        if p.stat().st_size > MAX_BYTES:
            raise ValueError(f"{path}: larger than {MAX_BYTES} bytes; not a launch file")
        data = p.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if b"\0" in data:
        raise ValueError(f"{path}: binary file, not a launch command, unit or env file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m planner lint",
        description="Check a vLLM/SGLang launch command, systemd unit or env file against "
        "the precision policy (default: full precision). Nothing is executed.",
    )
    p.add_argument("file", help="file to check ('-' reads standard input)")
    p.add_argument(
        "--policy", help="policy TOML file (default: planner/policy/policies/full-precision.toml)"
    )
    p.add_argument(
        "--model-config",
        metavar="CONFIG_JSON",
        help="the model's HF config.json: native precision from quantization_config",
    )
    p.add_argument(
        "--native",
        metavar="HINT",
        help="native precision instead of a config: int4, fp8-block, bf16, kimi-k2.5, "
        "deepseek-v3, minimax-m2.5, or weights=int4,kv_cache=bf16,...",
    )
    p.add_argument(
        "--env-file",
        action="append",
        default=[],
        metavar="PATH",
        help="an env file the unit loads (EnvironmentFile=); repeatable",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 on 'needs review' findings too")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        policy = load_policy(args.policy)
        native, source = None, ""
        if args.model_config and args.native:
            raise ValueError("give --model-config or --native, not both")
        if args.model_config:
            native, source = load_config(args.model_config), f"config {args.model_config}"
        elif args.native:
            native, source = parse_hint(args.native), f"--native {args.native}"
        text = read_text(args.file)
        env_files = [(path, read_text(path)) for path in args.env_file]
        result = lint_text(text, policy, native, args.file, env_files, source)
    except (PolicyError, NativeError, UnknownDtype, ValueError) as exc:
        print(f"planner lint: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for line in result.lines():
            print(line)
        print(f"{args.file}: {result.verdict} [native: {result.native_source}]")
    if not result.compliant or (args.strict and result.count("review")):
        return EXIT_VIOLATIONS
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
