"""The trace CLI on a small trace, end to end: median wall and CPU of fresh processes.

    python -m benchmarks.cli_startup TRACE --other TRACE2 [--before DIR]... [--repeat 5]

Runs ``python -m collectors trace TRACE --store S`` with ``--dry-run`` and with a commit
into a store that already holds one run (``S`` is a fresh temporary store; the import
of TRACE2 that fills it is not timed). ``duckdb floor``: a fresh process that only
imports duckdb, opens such a store and inserts TRACE's tables from Parquet files and its
runs row in one transaction - the least any importer that commits these rows to DuckDB pays,
on top of reading the trace. ``--before DIR`` (repeatable): a checkout of another commit
(``git archive REV | tar -x -C DIR``, with a ``.venv`` link), timed interleaved with this
tree so that all see the same load; its rows are named after DIR. CPU is the child's user
+ system time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


FLOOR = """
import sys, duckdb
store, run_id, *tables = sys.argv[1:]
con = duckdb.connect(store)
con.execute("BEGIN")
for name_file in tables:
    name, file = name_file.split("=", 1)
    con.execute(f"INSERT INTO {name} BY NAME SELECT '{run_id}' AS run_id, * FROM read_parquet('{file}')")
con.execute(f"INSERT INTO runs (run_id, verb, host, started_at, finished_at, status) "
            f"VALUES ('{run_id}', 'trace', 'h', now(), now(), 'ok')")
con.execute("COMMIT")
con.close()
"""


def spooled(trace: Path, into: Path) -> list[str]:
    """TRACE's tables as the spool holds them: ``name=file`` for each table with rows."""
    import logging

    from collectors.trace.ingest import ingest_traces
    from store.spool.bundle import Bundle, RunRecord, read_manifest, utc_now_iso, write_spool

    result = ingest_traces([trace], log=logging.getLogger("cli_startup"))
    now = utc_now_iso()
    run = RunRecord("floor", "trace", "h", now, now)
    arrow = {name: t.to_arrow() for name, t in result.tables.items()}  # Parquet, as before
    entry = write_spool(Bundle(run, arrow), into)
    return [f"{name}={entry / t['file']}" for name, t in read_manifest(entry)["tables"].items()
            if t["rows"]]  # fmt: skip


def once(root: Path, mode: str, trace: Path, other: Path, tables: list[str]) -> tuple[float, float]:
    """Wall and CPU of one fresh process: ``dry-run``, ``commit`` or ``duckdb floor``."""
    tmp = Path(tempfile.mkdtemp(prefix="cli_startup_"))
    try:
        store = tmp / "s.duckdb"
        base = [sys.executable, "-m", "collectors", "trace", "--store", str(store)]
        if mode != "dry-run":  # a migrated store with a run in it, as a user's store is
            subprocess.run([*base, str(other)], cwd=root, check=True, capture_output=True)
        cmd = {"dry-run": [*base, str(trace), "--dry-run"], "commit": [*base, str(trace)],
               "duckdb floor": [sys.executable, "-c", FLOOR, str(store), "trace-floor",
                                *tables]}[mode]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--other", type=Path, required=True,
                   help="another trace, imported first to fill the store")  # fmt: skip
    p.add_argument("--before", type=Path, action="append", default=[],
                   help="a checkout of a commit to compare with (repeatable)")  # fmt: skip
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    trace = a.trace.resolve()
    other = a.other.resolve()
    trees = {"this tree": ROOT, **{f"before: {d.name}": d.resolve() for d in a.before}}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    spool = Path(tempfile.mkdtemp(prefix="cli_startup_spool_"))
    tables = spooled(trace, spool)
    for _ in range(a.repeat):
        for mode in ("dry-run", "commit"):
            for name, root in trees.items():
                times.setdefault((name, mode), []).append(once(root, mode, trace, other, tables))
        times.setdefault(("-", "duckdb floor"), []).append(
            once(ROOT, "duckdb floor", trace, other, tables))
    shutil.rmtree(spool, ignore_errors=True)
    print("| tree | mode | median wall s | median CPU s | walls |\n|---|---|---:|---:|---|")
    for (name, mode), v in times.items():
        walls = ", ".join(f"{w:.2f}" for w, _ in v)
        print(f"| {name} | {mode} | {statistics.median(w for w, _ in v):.3f} | "
              f"{statistics.median(c for _, c in v):.3f} | {walls} |")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
