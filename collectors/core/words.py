"""Words for text output: a list of runs, hosts or files longer than a few items is a count
and its first few, never the whole list (a fleet's backlog is thousands of run ids; --json
holds every one)."""

from __future__ import annotations

from collections.abc import Sequence

FEW = 5


def first_few(items: Sequence[object], more: str = "more") -> str:
    """'a, b, c, d, e and 12 more' (the whole list when it is FEW or shorter)."""
    head = ", ".join(str(i) for i in items[:FEW])
    return head + (f" and {len(items) - FEW:,} {more}" if len(items) > FEW else "")
