"""What the product's modules import, read with ``ast`` at top level, inside functions and
under ``TYPE_CHECKING`` alike (a circle hidden by a lazy import is still a circle), and the
import circles among them, found by the standard library's ``graphlib``."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("planner", "collectors", "store", "pages", "analysis")


def product_modules(packages: tuple[str, ...] = PRODUCT) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``packages``."""
    out = {}
    for top in packages:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def imported(path: Path) -> set[str]:
    """Every dotted name ``path`` imports (``from a.b import c`` gives a.b and a.b.c)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the other modules of ``mods`` it imports."""
    return {m: {t for t in imported(p) if t in mods and t != m} for m, p in mods.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (its first module repeated at the end), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None
