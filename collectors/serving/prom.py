"""Parse the Prometheus text exposition format (what vLLM's ``GET /metrics`` returns).

Standard library only, so a cron scrape every minute stays cheap. Handles ``# TYPE`` lines,
label sets with escaped quotes, ``+Inf``/``NaN`` values, optional timestamps, and the
``_created`` samples ``prometheus_client`` adds (dropped: they are not measurements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
# A label set up to the "}" closing it: one inside a quoted value, or escaped, does not.
_LABEL_SET = re.compile(r'\{((?:[^"}\\]|\\.|"(?:[^"\\]|\\.)*")*)\}')


@dataclass(frozen=True)
class Sample:
    family: str  # metric family, e.g. vllm:inter_token_latency_seconds
    kind: str  # gauge | counter | histogram | summary | untyped
    name: str  # sample name, e.g. vllm:inter_token_latency_seconds_bucket
    labels: dict[str, str] = field(hash=False)
    value: float


class ExpositionError(ValueError):
    """The text is not in the Prometheus exposition format."""


# The format's three escapes (\\, \n, \") in one pass, as prometheus_client/parser.py
# ``_replace_escaping`` does: replaced one after another, an escaped backslash followed by
# "n" became a newline. Any other backslash stays as written.
_ESCAPE = re.compile(r'\\([\\n"])')


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], value)


def _family_of(name: str, types: dict[str, str]) -> tuple[str, str]:
    if name in types:
        return name, types[name]
    for kind, suffixes in _SUFFIXES.items():
        for suffix in suffixes:
            base = name[: -len(suffix)]
            if name.endswith(suffix) and types.get(base) == kind:
                return base, kind
    return name, "untyped"


def parse(text: str, prefix: str | None = None) -> list[Sample]:
    """Every sample in ``text`` (optionally only families starting with ``prefix``)."""
    types: dict[str, str] = {}
    samples: list[Sample] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        match = _NAME.match(line)
        if not match:
            raise ExpositionError(f"line {lineno}: no metric name in {raw[:80]!r}")
        name, rest = match.group(0), line[match.end() :]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            label_set = _LABEL_SET.match(rest)
            if not label_set:
                raise ExpositionError(f"line {lineno}: unterminated label set")
            body, rest = label_set[1], rest[label_set.end() :]
            pos = 0
            while pos < len(body):
                m = _LABEL.match(body, pos)
                if not m:
                    raise ExpositionError(f"line {lineno}: bad label set {body[:80]!r}")
                labels[m.group(1)] = _unescape(m.group(2))
                pos = m.end()
        if name.endswith("_created"):
            continue  # prometheus_client's creation timestamps, not measurements
        if prefix and not name.startswith(prefix):
            continue
        try:
            value = float(rest.split()[0])  # float() reads "+Inf", "-Inf" and "NaN" too
        except (ValueError, IndexError):
            raise ExpositionError(f"line {lineno}: bad value in {raw[:80]!r}") from None
        family, kind = _family_of(name, types)
        samples.append(Sample(family, kind, name, labels, value))
    return samples
