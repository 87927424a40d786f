"""Markdown tables (for docs/benchmarks.md) from benchmarks/scale/pages.py results.

python -m benchmarks.scale.report benchmarks/out/scale-pages.json [--queries]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WARM_GOAL_S, COLD_GOAL_S = 1.0, 3.0


def pages_table(results: list[dict]) -> str:
    lines = [
        "| page | cold s (new process) | cold s (cache cleared) | warm s | of which HTML export s "
        "| goal met |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['page']} | {r['error']} | | | | no |")
            continue
        ok = r["warm_s"] < WARM_GOAL_S and r["cold_s"] < COLD_GOAL_S
        lines.append(f"| {r['page']} | {r['cold_s']:.2f} | {r['cold_cache_s']:.2f} | "
                     f"{r['warm_s']:.2f} | {r.get('html_export_s', 0):.2f} | "
                     f"{'yes' if ok else '**no**'} |")  # fmt: skip
    return "\n".join(lines)


def queries_table(results: list[dict]) -> str:
    lines = ["| page | named query | rows | in page, cold s | plain DuckDB s |",
             "|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        seen = set()
        for q in r.get("queries", []):
            if q["query"] in seen or q["query"] == "queries.hosts" and r["page"] != "overview":
                continue  # one line per named query; the sidebar's hosts() once
            seen.add(q["query"])
            lines.append(f"| {r['page']} | `{q['query']}` | {q['rows']} | {q['page_s']:.3f} | "
                         f"{q['plain_s']:.3f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--queries", action="store_true")
    args = ap.parse_args(argv)
    results = json.loads(args.results.read_text())
    print(pages_table(results))
    if args.queries:
        print()
        print(queries_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
