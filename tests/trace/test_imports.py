"""The trace package's modules import each other in one direction only (issue 22 item 4):
the Kineto reader uses the scanner and the split; the split uses the scanner, never the
reader."""

from __future__ import annotations

from tests.imports import cycle, import_graph, product_modules

PREFIX = "collectors.trace."


def test_no_import_circle_in_collectors_trace():
    mods = {n: p for n, p in product_modules(("collectors",)).items() if n.startswith(PREFIX)}
    graph = import_graph(mods)
    reader, scanner, split = (PREFIX + n for n in ("readers.kineto", "readers.kineto_scan",
                                                   "readers.kineto_split"))  # fmt: skip
    assert {scanner, split} <= graph[reader]
    assert reader not in graph[split] and scanner in graph[split]
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])
