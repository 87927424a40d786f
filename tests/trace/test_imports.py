"""The trace package's modules import each other in one direction only (issue 22 item 4):
the Kineto reader uses the scanner and the split; the split uses the scanner, never the
reader. Modules are named by their path under collectors/trace (``readers.kineto``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "collectors" / "trace"


def _name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")


MODULES = {_name(p) for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Modules of collectors.trace that ``path`` imports, at top level or inside functions."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name.startswith("collectors.trace."):
                rel = name.removeprefix("collectors.trace.")
                if rel in MODULES:
                    out.add(rel)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_circle_in_collectors_trace():
    graph = {_name(p): _imports(p) - {_name(p)} for p in PACKAGE.rglob("*.py")}
    reader, scanner, split = "readers.kineto", "readers.kineto_scan", "readers.kineto_split"
    assert {scanner, split} <= graph[reader]
    assert reader not in graph[split] and scanner in graph[split]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_one():
    assert _cycle({"reader": {"split"}, "split": {"reader"}}) == ["reader", "split", "reader"]
