"""Reading an Nsight Systems export: the standard library's sqlite3 vs DuckDB's sqlite extension.

    python -m benchmarks.nsys_read [--copies 1000] [--repeat 5] [--ext-path DIR]

Builds a large export from the real nsys 2024.5 one (tests/fixtures/nsys: 1,312 kernels,
279 memcpy, 3,048 runtime calls) tiled ``--copies`` times in time (``benchmarks/out``;
1,000 copies: 1.3 M kernels, ~ a vLLM TP=8 capture of 100 decode steps), then times, each
in this process, medians of ``--repeat``:

- ``rows_sqlite3``: the reader's three bulk queries (kernels, memcpy, runtime launches) as
  it runs them, the cursor's rows straight into numpy (collectors/trace/readers/nsys.py
  ``_rows``);
- ``rows_duckdb``: the same queries through DuckDB's sqlite extension
  (``ATTACH ... (TYPE sqlite)``, ``fetchnumpy``), the pinned ``duckdb-extension-sqlite``
  wheel installed apart from the product's environment (``pip install --target DIR
  duckdb-extension-sqlite==1.5.5``; ``--ext-path DIR``);
- ``read_nsys`` and ``ingest``: the whole reader, and the whole import short of the commit.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import shutil
import sqlite3
import statistics
import sys
import time
from itertools import chain
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
SOURCE = ROOT / "tests" / "fixtures" / "nsys" / "pipit_cloverleaf_nsys2024.5.sqlite"
TILED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME")
QUERIES = (
    "SELECT 0, start, \"end\", deviceId, streamId, coalesce(correlationId, -1), "
    "coalesce(globalPid, 0), demangledName, coalesce(graphNodeId, -1), shortName "
    "FROM {db}CUPTI_ACTIVITY_KIND_KERNEL",
    "SELECT 1, start, \"end\", deviceId, streamId, coalesce(correlationId, -1), "
    "coalesce(globalPid, 0), -1 - copyKind, coalesce(graphNodeId, -1), 0 "
    "FROM {db}CUPTI_ACTIVITY_KIND_MEMCPY",
    "SELECT coalesce(correlationId, -1), start, coalesce(globalTid, 0), nameId "
    "FROM {db}CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({launch_ids})",
)


def tiled_export(copies: int) -> Path:
    """The real export with its kernels, copies and runtime calls repeated in time."""
    out = OUT / f"nsys_cloverleaf_x{copies}.sqlite"
    if out.exists():
        return out
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part")
    shutil.copy(SOURCE, tmp)
    con = sqlite3.connect(tmp)
    lo, hi = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    corr = con.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    for table in TILED:
        cols = [c[1] for c in con.execute(f"PRAGMA table_info({table})")]
        shifted = ", ".join(
            f"{c} + :dt" if c in ("start", "end") else f"{c} + :dc" if c == "correlationId" else c
            for c in cols
        )
        base = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for k in range(1, copies):
            con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {shifted} FROM {table} "
                        f"WHERE rowid <= :n", {"dt": k * (hi - lo), "dc": k * corr, "n": base})  # fmt: skip
    con.commit()
    con.close()
    tmp.rename(out)
    return out


def launch_ids(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return ",".join(str(i) for i, n in con.execute("SELECT id, value FROM StringIds")
                        if "Launch" in n or "emcpy" in n or "emset" in n)  # fmt: skip
    finally:
        con.close()


def rows_sqlite3(path: Path, ids: str) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = 0
    for q in QUERIES:  # as the reader's _rows: integers straight from the cursor
        cur = con.execute(q.format(db="", launch_ids=ids))
        n += len(np.fromiter(chain.from_iterable(cur), dtype=np.int64)
                 .reshape(-1, len(cur.description)))  # fmt: skip
    con.close()
    return n


def rows_duckdb(path: Path, ids: str) -> int:
    import duckdb

    ext = importlib.import_module("duckdb_extension_sqlite")
    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "extension_directory": str(OUT / "duckdb-ext")})  # fmt: skip
    version = con.execute("PRAGMA version").fetchone()[0]
    wheel = Path(ext.__file__).parent / "extensions" / version / "sqlite.duckdb_extension"
    con.execute(f"INSTALL '{wheel}'")
    con.execute("LOAD sqlite")
    con.execute(f"ATTACH '{path}' AS nsys (TYPE sqlite, READ_ONLY)")
    n = 0
    for q in QUERIES:
        cols = con.execute(q.format(db="nsys.", launch_ids=ids)).fetchnumpy()
        n += len(np.column_stack([np.asarray(c, dtype=np.int64) for c in cols.values()]))
    con.close()
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ext-path", help="folder holding duckdb_extension_sqlite (pip --target)")
    args = ap.parse_args()
    if args.ext_path:
        sys.path.insert(0, args.ext_path)
    sys.path.insert(0, str(ROOT))
    from collectors.trace.ingest import ingest_traces
    from collectors.trace.readers.nsys import read_nsys

    path = tiled_export(args.copies)
    ids = launch_ids(path)
    tools = {"rows_sqlite3": lambda: rows_sqlite3(path, ids),
             "rows_duckdb": lambda: rows_duckdb(path, ids),
             "read_nsys": lambda: read_nsys(path), "ingest": lambda: ingest_traces([path])}  # fmt: skip
    print(f"{path.name}: {path.stat().st_size / 1e6:.0f} MB; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    for name, fn in tools.items():
        try:
            fn()  # warm the page cache (and DuckDB's extension install)
        except ImportError as exc:
            print(f"{name}: skipped ({exc}; pass --ext-path)")
            continue
        times, cpu = [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        print(f"{name:>13}: wall {statistics.median(times):.2f} s, CPU "
              f"{statistics.median(cpu):.2f} s (median of {args.repeat})")


if __name__ == "__main__":
    main()
