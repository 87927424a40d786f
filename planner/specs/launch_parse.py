"""Parse launch commands, systemd units and env files into settings, without executing them.

Only text processing happens here: ``shlex`` splitting, quote-aware comment stripping and
plain ``$VAR`` substitution from assignments made earlier in the same file. Nothing is run,
no referenced file is opened, no command substitution is evaluated.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_SECTION = re.compile(r"^\s*\[(Unit|Service|Install|Socket|Timer)\]\s*$", re.M)
_SEPARATORS = {";", "&&", "||", "|", "&"}
SHORT_FLAGS = {
    "-q": "--quantization",
    "-tp": "--tensor-parallel-size",
    "-dp": "--data-parallel-size",
}


@dataclass(frozen=True)
class Setting:
    """An environment assignment: ``name=value`` at ``line`` (1-based), and how it was set."""

    name: str
    value: str
    line: int
    source: str
    file: str = ""  # set for settings read from another file (an EnvironmentFile=)


@dataclass(frozen=True)
class Arg:
    """A ``--flag`` (normalised: dashes, long form) with its value (None for a bare switch)."""

    flag: str
    value: str | None
    line: int
    text: str


@dataclass(frozen=True)
class Command:
    engine: str  # "vllm", "sglang" or "" (flags found, engine not recognised)
    line: int
    args: tuple[Arg, ...]

    def get(self, flag: str) -> Arg | None:
        """The last occurrence wins, as with argparse."""
        hits = [a for a in self.args if a.flag == flag]
        return hits[-1] if hits else None


@dataclass
class Parsed:
    kind: str  # "systemd", "env" or "shell"
    env: list[Setting] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    comments: list[tuple[int, str]] = field(default_factory=list)
    env_files: list[tuple[int, str]] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)
    unresolved: dict[str, int] = field(default_factory=dict)  # $VAR used, never assigned


def split_comment(text: str) -> tuple[str, str]:
    """Split shell text into (code, comment), honouring quotes and backslash escapes."""
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i], text[i + 1 :].strip()
        i += 1
    return text, ""


def _logical_lines(text: str, comment_chars: str = "#") -> list[tuple[int, str, list]]:
    """Join backslash continuations: (first line number, code, [(line, comment)] on the way)."""
    out: list[tuple[int, str, list]] = []
    start, parts, notes = 0, [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped[:1] in comment_chars and stripped:
            if parts:  # a comment line inside a continuation: bash ends the command here
                notes.append((number, stripped.lstrip(comment_chars).strip()))
                continue
            out.append((number, "", [(number, stripped.lstrip(comment_chars).strip())]))
            continue
        code, comment = split_comment(raw)
        if comment:
            notes.append((number, comment))
        if not parts:
            start = number
        body = code.rstrip()
        trailing = len(body) - len(body.rstrip("\\"))
        if trailing % 2 == 1:
            parts.append(body[:-1])
            continue
        parts.append(body)
        out.append((start, " ".join(p.strip() for p in parts), notes))
        parts, notes = [], []
    if parts:
        out.append((start, " ".join(p.strip() for p in parts), notes))
    return out


def _tokens(code: str) -> list[str] | None:
    lexer = shlex.shlex(code, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def _expand(value: str, env: dict[str, str], parsed: Parsed, line: int) -> str:
    """Substitute $VAR / ${VAR} / ${VAR:-default} from earlier assignments (text only)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        parsed.unresolved.setdefault(name, line)
        return m.group(0)

    return _VAR.sub(sub, value)


def _engine(tokens: list[str]) -> str:
    joined = " ".join(tokens)
    if "sglang.launch_server" in joined or "lmsysorg/sglang" in joined:
        return "sglang"
    names = [t.rsplit("/", 1)[-1] for t in tokens]
    if "vllm.entrypoints" in joined or "vllm-openai" in joined:
        return "vllm"
    if "vllm" in names and "serve" in names[names.index("vllm") :]:
        return "vllm"
    if "sglang" in names and "serve" in names[names.index("sglang") :]:
        return "sglang"
    return ""


def _command(tokens: list[str], line: int, env: dict[str, str], parsed: Parsed, source: str):
    """Record leading assignments / docker -e as settings; return a Command if it has flags."""
    i = 0
    while i < len(tokens) and tokens[i] in ("env", "exec", "sudo", "-E", "nohup", "time"):
        i += 1
    while i < len(tokens) and (m := _ASSIGN.match(tokens[i])):
        value = _expand(m.group(2), env, parsed, line)
        env[m.group(1)] = value
        parsed.env.append(Setting(m.group(1), value, line, source))
        i += 1
    rest = [_expand(t, env, parsed, line) for t in tokens[i:]]
    args: list[Arg] = []
    j = 0
    while j < len(rest):
        tok = rest[j]
        if tok in ("-e", "--env") and j + 1 < len(rest) and (m := _ASSIGN.match(rest[j + 1])):
            parsed.env.append(Setting(m.group(1), m.group(2), line, "docker -e"))
            j += 2
            continue
        if tok.startswith("--env=") and (m := _ASSIGN.match(tok[6:])):
            parsed.env.append(Setting(m.group(1), m.group(2), line, "docker --env"))
        elif tok.startswith("--") or tok in SHORT_FLAGS:
            name, eq, value = tok.partition("=")
            name = SHORT_FLAGS.get(name, "--" + name[2:].replace("_", "-"))
            text = tok
            if not eq and j + 1 < len(rest) and not rest[j + 1].startswith("-"):
                value, eq = rest[j + 1], "="
                text = f"{tok} {value}"
                j += 1
            args.append(Arg(name, value if eq else None, line, text))
        j += 1
    if args:
        parsed.commands.append(Command(_engine(rest), line, tuple(args)))


def _shell_line(number: int, code: str, env: dict[str, str], parsed: Parsed, source: str):
    tokens = _tokens(code)
    if tokens is None:
        parsed.problems.append((number, "unbalanced quotes; split on whitespace instead"))
        tokens = code.split()
    if tokens and tokens[0] == "export":
        tokens = tokens[1:]
        source = "export"
    segment: list[str] = []
    for tok in [*tokens, ";"]:
        if tok in _SEPARATORS:
            if segment:
                _command(segment, number, env, parsed, source)
            segment = []
        else:
            segment.append(tok)


def _systemd(text: str, parsed: Parsed) -> None:
    env: dict[str, str] = {}
    for number, code, notes in _logical_lines(text, comment_chars="#;"):
        parsed.comments.extend(notes)
        key, eq, value = code.strip().partition("=")
        if not eq:
            continue
        key, value = key.strip(), value.strip()
        if key == "Environment":
            for item in _tokens(value) or value.split():
                if m := _ASSIGN.match(item):
                    env[m.group(1)] = m.group(2)
                    parsed.env.append(Setting(m.group(1), m.group(2), number, "Environment="))
        elif key == "EnvironmentFile":
            parsed.env_files.append((number, value.lstrip("-")))
        elif key in ("ExecStart", "ExecStartPre", "ExecStartPost"):
            _shell_line(number, value.lstrip("@-:+!"), env, parsed, "ExecStart")


def _loose(text: str, parsed: Parsed, known_env: Iterable[str], known_keys: Iterable[str]):
    """Settings written in other syntaxes (compose ``- NAME=1``, ``NAME: "1"``, a YAML
    ``--config`` file's ``kv-cache-dtype: fp8``): only for names the linter knows."""
    seen = {(s.name, s.value) for s in parsed.env}
    flags = {(a.flag, a.line) for c in parsed.commands for a in c.args}
    env_re = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, known_env)) + r")\s*[=:]\s*"
                        r"[\"']?([^\s\"',}]+)") if known_env else None  # fmt: skip
    keys = {k.lstrip("-") for k in known_keys}
    loose = []
    for number, raw in enumerate(text.splitlines(), start=1):
        code, _ = split_comment(raw)
        for m in env_re.finditer(code) if env_re else ():
            if (m.group(1), m.group(2)) not in seen:
                seen.add((m.group(1), m.group(2)))
                parsed.env.append(Setting(m.group(1), m.group(2), number, "text"))
        key = re.match(r"^\s*([A-Za-z][\w-]*)\s*:\s*[\"']?([^\s\"'#]+)", code)
        if key and key.group(1).replace("_", "-") in keys:
            flag = "--" + key.group(1).replace("_", "-")
            if (flag, number) not in flags:
                loose.append(Arg(flag, key.group(2), number, code.strip()))
    if loose:
        parsed.commands.append(Command("", loose[0].line, tuple(loose)))


def _relocate(parsed: Parsed, lines: list[str], window: int = 400) -> None:
    """Point each flag and prefix assignment at the physical line it is written on (a
    continued command is parsed as one logical line starting at its first line)."""

    def find(needle: str, start: int) -> int:
        for n in range(start, min(len(lines), start + window) + 1):
            if needle in lines[n - 1]:
                return n
        return start

    for k, cmd in enumerate(parsed.commands):
        cursor, moved = cmd.line, []
        for arg in cmd.args:
            cursor = find(arg.text.split()[0].split("=")[0], cursor)
            moved.append(Arg(arg.flag, arg.value, cursor, arg.text))
        parsed.commands[k] = Command(cmd.engine, cmd.line, tuple(moved))
    parsed.env[:] = [
        Setting(s.name, s.value, find(f"{s.name}=", s.line), s.source) for s in parsed.env
    ]


def parse_text(text: str, known_env: Iterable[str] = (), known_keys: Iterable[str] = ()) -> Parsed:
    """Parse a launch command / shell script, an env file or a systemd unit.

    ``known_env`` / ``known_keys`` (flags without dashes) are also looked for in syntaxes
    that are not shell (docker-compose lists, YAML config files).
    """
    if _SECTION.search(text) or re.search(r"^\s*ExecStart\s*=", text, re.M):
        parsed = Parsed("systemd")
        _systemd(text, parsed)
    else:
        parsed = Parsed("shell")
        env: dict[str, str] = {}
        for number, code, notes in _logical_lines(text):
            parsed.comments.extend(notes)
            if code.strip():
                _shell_line(number, code, env, parsed, "assignment")
    _relocate(parsed, text.splitlines())
    _loose(text, parsed, tuple(known_env), tuple(known_keys))
    if parsed.kind == "shell" and not parsed.commands and parsed.env:
        parsed.kind = "env"
    return parsed
