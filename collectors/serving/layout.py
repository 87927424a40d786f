"""A server's parallel layout in the planner's terms, whatever engine runs it.

Layout kinds use the planner's names: ``tp``, ``tp_ep_dp1``, ``dp_attn_ep``, ``tp_dp``.
Engines parse their own launch flags into it (collectors/vllm/layout.py,
collectors/sglang/layout.py).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from collectors.core.errors import InputError


def split_flags(text: str) -> tuple[dict[str, str], set[str], list[str]]:
    """(``--flag value`` pairs, bare flags, positional words) of a server's command line
    (``vllm serve ...``, ``python -m sglang.launch_server ...``, or just its flags)."""
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"--server-args: cannot split {text!r} ({exc})") from None
    values: dict[str, str] = {}
    flags: set[str] = set()
    words: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-"):
            key, eq, val = tok.partition("=")
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if eq:
                values[key] = val
            elif nxt is not None and not nxt.startswith("-"):
                values[key] = nxt
                i += 1
            else:
                flags.add(key)
        else:
            words.append(tok)
        i += 1
    return values, flags, words


def int_flag(values: dict[str, str], spellings: tuple[str, ...]) -> int | None:
    """The size given by any of a flag's ``spellings`` (the last one wins), or None."""
    size = None
    for flag in spellings:
        if flag in values:
            try:
                size = int(values[flag])
            except ValueError:
                raise ValueError(f"--server-args: {flag} {values[flag]!r} is not a number") from None
    return size


def parse_server_args(parse: Callable[[str], Layout], text: str | None) -> Layout | None:
    """``--server-args`` through an engine's ``from_server_args``; None when not given, an
    InputError when it cannot be parsed."""
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise InputError(str(exc)) from None


@dataclass
class Layout:
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: bool | None = None
    all2all_backend: str | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    model: str | None = None
    source: str = "unknown"  # server-args | server_info | trace-files | flags | unknown

    @property
    def known(self) -> bool:
        return self.tp is not None

    @property
    def world_size(self) -> int | None:
        return None if self.tp is None else self.tp * (self.pp or 1) * (self.dp or 1)

    @property
    def kind(self) -> str | None:
        """The planner's layout kind for this vLLM layout."""
        if self.tp is None:
            return None
        tp, dp = self.tp, self.dp or 1
        if dp > 1:
            return "dp_attn_ep" if (self.ep and tp == 1) else "tp_dp"
        return "tp_ep_dp1" if self.ep else "tp"

    @property
    def name(self) -> str | None:
        """Short label, e.g. ``TP8``, ``TP8+EP``, ``TP1xDP8+EP``."""
        if self.tp is None:
            return None
        name = f"TP{self.tp}"
        if (self.dp or 1) > 1:
            name += f"xDP{self.dp}"
        if (self.pp or 1) > 1:
            name += f"xPP{self.pp}"
        return name + ("+EP" if self.ep else "")

    def row(self) -> dict[str, Any]:
        """The layout columns every serving table carries."""
        return {
            "tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep,
            "layout": self.name, "layout_kind": self.kind, "layout_source": self.source,
        }  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "name": self.name, "kind": self.kind}


_SECRET_FLAG = re.compile(r"(key|token|secret|password)$", re.IGNORECASE)


def redact(text: str | None) -> str | None:
    """The command line with values of ``--api-key``-like flags replaced (it gets stored)."""
    if not text:
        return text
    try:
        tokens = shlex.split(text)
    except ValueError:
        return "(unparseable command line, not stored)"
    out, hide = [], False
    for tok in tokens:
        if hide and not tok.startswith("-"):
            out.append("REDACTED")
        elif tok.startswith("-") and "=" in tok and _SECRET_FLAG.search(tok.split("=", 1)[0]):
            out.append(tok.split("=", 1)[0] + "=REDACTED")
        else:
            out.append(tok)
        hide = tok.startswith("-") and "=" not in tok and bool(_SECRET_FLAG.search(tok))
    return shlex.join(out)
