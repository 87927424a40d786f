"""The tree a newcomer reads: small folders, no import circles, one door into the planner.

Imports are read with ``ast`` from every product module, at top level, inside functions and
under ``TYPE_CHECKING`` alike: a circle hidden by a lazy import is still a circle.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("planner", "collectors", "store", "pages", "analysis")
MAX_MODULES_PER_FOLDER = 15


def _modules(packages: tuple[str, ...] = PRODUCT) -> dict[str, Path]:
    out = {}
    for top in packages:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def _imported(path: Path) -> set[str]:
    """Every dotted name ``path`` imports (``from a.b import c`` gives a.b and a.b.c)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {t for t in _imported(p) if t in mods and t != m} for m, p in mods.items()}


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


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circles_in_the_product() -> None:
    graph = _graph()
    assert len(graph) > 150  # the scan saw the tree
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    per_folder: dict[Path, list[str]] = defaultdict(list)
    for path in _modules().values():
        if path.name not in ("__init__.py", "__main__.py"):
            per_folder[path.parent.relative_to(ROOT)].append(path.name)
    big = {str(d): len(f) for d, f in per_folder.items() if len(f) > MAX_MODULES_PER_FOLDER}
    assert not big, f"split these folders: {big}"


def test_pages_and_collectors_use_the_planner_through_its_facade() -> None:
    mods = _modules(("pages", "collectors")) | {"app": ROOT / "app.py"}
    bad = {
        str(path.relative_to(ROOT)): sorted(n for n in _imported(path)
                                            if n.split(".")[0] == "planner"
                                            and not n.startswith("planner.api"))
        for path in mods.values()
    }  # fmt: skip
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"import these through planner.api: {bad}"
    assert any("planner.api" in _imported(p) for p in mods.values())  # the check saw a use


def test_the_product_never_imports_the_fit_nor_reads_the_shared_fixtures() -> None:
    shared = re.compile(r"""\.\./shared|/\s*["']shared["']|shared/fixtures""")
    for name, path in _modules().items():
        assert not any(n.split(".")[0] == "fitting" for n in _imported(path)), name
        code = "\n".join(line for line in path.read_text().splitlines()
                         if not line.lstrip().startswith("#"))  # fmt: skip
        assert not shared.search(code), f"{name} refers to ../shared"
