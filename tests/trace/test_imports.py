"""The trace package's modules import each other in one direction only (issue 22 item 4):
the Kineto reader uses the scanner and the split; the split uses the scanner, never the
reader. Checked over collectors/trace and its readers/ folder."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "collectors" / "trace"
MODULES = [*PACKAGE.glob("*.py"), *(PACKAGE / "readers").glob("*.py")]


def _imports(path: Path) -> set[str]:
    """Modules of collectors.trace that ``path`` imports, at top level or inside functions."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module in ("collectors.trace", "collectors.trace.readers"):
                out.update(a.name for a in node.names)
            elif node.module.startswith("collectors.trace."):
                out.add(node.module.split(".")[-1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[-1] for a in node.names
                       if a.name.startswith("collectors.trace."))  # fmt: skip
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
    graph = {p.stem: _imports(p) - {p.stem} for p in MODULES if p.stem != "__init__"}
    assert {"kineto_scan", "kineto_split"} <= graph["kineto"]
    assert "kineto" not in graph["kineto_split"] and "kineto_scan" in graph["kineto_split"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_one():
    assert _cycle({"reader": {"split"}, "split": {"reader"}}) == ["reader", "split", "reader"]
