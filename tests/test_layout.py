"""The tree a newcomer reads: small folders, no import circles, one door into the planner.

Imports are read with ``ast`` from every product module, at top level, inside functions and
under ``TYPE_CHECKING`` alike: a circle hidden by a lazy import is still a circle.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from tests.imports import ROOT, cycle, import_graph, imported, product_modules

MAX_MODULES_PER_FOLDER = 15


def test_the_cycle_finder_finds_a_cycle() -> None:
    found = cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert found is not None and found[0] == found[-1] and sorted(found[:-1]) == ["a", "b", "c"]
    assert cycle({"reader": {"split"}, "split": {"reader"}}) in (
        ["reader", "split", "reader"], ["split", "reader", "split"])
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circles_in_the_product() -> None:
    graph = import_graph(product_modules())
    assert len(graph) > 150  # the scan saw the tree
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    per_folder: dict[Path, list[str]] = defaultdict(list)
    for path in product_modules().values():
        if path.name not in ("__init__.py", "__main__.py"):
            per_folder[path.parent.relative_to(ROOT)].append(path.name)
    big = {str(d): len(f) for d, f in per_folder.items() if len(f) > MAX_MODULES_PER_FOLDER}
    assert not big, f"split these folders: {big}"


def test_pages_and_collectors_use_the_planner_through_its_facade() -> None:
    mods = product_modules(("pages", "collectors")) | {"app": ROOT / "app.py"}
    bad = {
        str(path.relative_to(ROOT)): sorted(n for n in imported(path)
                                            if n.split(".")[0] == "planner"
                                            and not n.startswith("planner.api"))
        for path in mods.values()
    }  # fmt: skip
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"import these through planner.api: {bad}"
    assert any("planner.api" in imported(p) for p in mods.values())  # the check saw a use


def test_the_product_never_imports_the_fit_nor_reads_the_shared_fixtures() -> None:
    shared = re.compile(r"""\.\./shared|/\s*["']shared["']|shared/fixtures""")
    for name, path in product_modules().items():
        assert not any(n.split(".")[0] == "fitting" for n in imported(path)), name
        code = "\n".join(line for line in path.read_text().splitlines()
                         if not line.lstrip().startswith("#"))  # fmt: skip
        assert not shared.search(code), f"{name} refers to ../shared"
