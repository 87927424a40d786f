"""Readers against a writer that commits in a loop: how long does a page's query wait?

    python -m benchmarks.store_contention [--seconds 15] [--readers 2] [--before DIR]

One process commits `host` runs back to back (``tests/store/stress_writer.py``, what
``collectors flush`` of a long backlog does) while READERS processes run the Overview's
queries in a loop, each through a fresh read-only connection. Prints the readers' wait
per query (median, p99, max), their failures, and the writer's commits. ``--before DIR``:
the same with another checkout (``git archive REV | tar -x -C DIR``, with a ``.venv``
link), run right after this tree so both see about the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

READER = """
import json, sys, time
from store.queries import overview as queries
from store.location import resolve
loc, deadline = resolve(sys.argv[1]), time.monotonic() + float(sys.argv[2])
waits, errors = [], 0
while time.monotonic() < deadline:
    start = time.monotonic()
    try:
        queries.recent_runs(loc, limit=100_000)
        queries.freshness(loc)
    except Exception:
        errors += 1
    waits.append(time.monotonic() - start)
print(json.dumps({"waits": waits, "errors": errors}))
"""

SEED = """
import sys
from store.spool.bundle import write_spool
from store.commit import commit_entry
from store.location import resolve
from tests.store.bundles import host_bundle
loc = resolve(sys.argv[1])
commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
"""


def run_tree(root: Path, seconds: float, readers: int) -> dict:
    python = str(root / ".venv" / "bin" / "python")
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory(prefix="contention_") as tmp:
        store, log = Path(tmp) / "s.duckdb", Path(tmp) / "committed.txt"
        env["STEPSCOPE_STORE"] = str(store)
        subprocess.run([python, "-c", SEED, str(store)], cwd=root, env=env, check=True)
        writer = subprocess.Popen([python, "-m", "tests.store.stress_writer", str(store),
                                   str(seconds), str(log)], cwd=root, env=env)  # fmt: skip
        procs = [subprocess.Popen([python, "-c", READER, str(store), str(seconds)], cwd=root,
                                  env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(readers)]  # fmt: skip
        results = [json.loads(p.communicate()[0]) for p in procs]
        writer.wait()
        commits = len(log.read_text().split())
    waits = sorted(w for r in results for w in r["waits"])
    return {
        "queries": len(waits),
        "median_ms": 1000 * waits[len(waits) // 2],
        "p99_ms": 1000 * waits[int(len(waits) * 0.99)],
        "max_s": waits[-1],
        "failed": sum(r["errors"] for r in results),
        "commits": commits,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--readers", type=int, default=2)
    p.add_argument("--before", type=Path, help="another checkout to run the same way")
    args = p.parse_args()
    trees = [("this tree", ROOT)] + ([("before", args.before)] if args.before else [])
    print("| tree | reader queries | median wait ms | p99 ms | longest wait s | failed "
          "| writer commits |\n|---|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    for name, root in trees:
        r = run_tree(root, args.seconds, args.readers)
        print(f"| {name} | {r['queries']} | {r['median_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['max_s']:.2f} | {r['failed']} | {r['commits']} |", flush=True)
    print(f"load average: {os.getloadavg()[0]:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
