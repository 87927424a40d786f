"""A trace's tables spooled as JSON columns or as Parquet: spool write + commit, by size.

    python -m benchmarks.spool_format [--repeat 7] [--rows 434,2000,5000,20000,50000]

The tables are a real trace's (``h100_qwen1.5_0.5b.json.gz``, 1,707 kernels), its kernel
table tiled to about ROWS rows (rows repeated, so names, categories and numbers stay real). For each
size, interleaved: ``write_spool`` then ``commit_entry`` into a store that holds one run,
once as JSON (what ``store/spool/bundle.py`` does up to ``JSON_MAX_ROWS``) and once as Parquet
(the same tables handed over as pyarrow tables). Both run in this process with pyarrow
already imported, so the rows compare the formats' own costs; the last line times what a
fresh process pays only on the Parquet path: ``import pyarrow, pyarrow.parquet`` after
numpy (which a collector has imported anyway).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from collectors.trace.ingest import ingest_traces
from collectors.trace.table import Column, Table
from store.commit import commit_entry
from store.location import resolve
from store.spool import bundle as bundle_mod
from store.spool.bundle import Bundle, RunRecord, utc_now_iso, write_spool

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests/fixtures/traces/tracelens/h100_qwen1.5_0.5b.json.gz"


def tiled(tables: dict[str, Table], rows: int) -> dict[str, Table]:
    """The same tables with ``trace_kernels`` as one part repeated to about ``rows`` rows."""
    kernels = tables["trace_kernels"]
    (part,) = kernels.parts
    copies = max(1, round(rows / len(kernels)))

    def tile(col: Column) -> Column:
        values = col.values * copies if isinstance(col.values, list) else np.tile(col.values,
                                                                                   copies)
        null = None if col.null is None else np.tile(col.null, copies)
        return Column(col.type, values, null, col.dictionary)

    return {**tables, "trace_kernels": Table([{n: tile(c) for n, c in part.items()}])}


def once(tables: dict, fmt: str, base: Path, run: int) -> tuple[float, float]:
    """Seconds to spool, then to commit, one run into a copy of the ``base`` store."""
    tmp = Path(tempfile.mkdtemp(prefix="spool_format_"))
    try:
        loc = resolve(tmp / "s.duckdb")
        shutil.copy(base, loc.path)
        if fmt == "parquet":
            tables = {name: t.to_arrow() for name, t in tables.items()}
        bundle_mod.JSON_MAX_ROWS = 10**9  # both formats at every size: the bench sets the bar
        now = utc_now_iso()
        bundle = Bundle(RunRecord(f"trace-{fmt}-{run}", "trace", "h", now, now), tables)
        t0 = time.perf_counter()
        entry = write_spool(bundle, loc.spool_dir)
        t1 = time.perf_counter()
        commit_entry(loc, entry)
        return t1 - t0, time.perf_counter() - t1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def import_cost(repeat: int) -> float:
    code = "import numpy, time; t = time.perf_counter(); import pyarrow, pyarrow.parquet; " \
           "print(time.perf_counter() - t)"  # numpy first: the collector has it already
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout) for _ in range(repeat)  # fmt: skip
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--rows", default="1707,5000,10000,20000,50000")
    a = p.parse_args()
    import pyarrow.parquet  # noqa: F401 - both formats timed with it imported

    tables = ingest_traces([TRACE], log=logging.getLogger("spool_format")).tables
    work = Path(tempfile.mkdtemp(prefix="spool_format_base_"))
    base = resolve(work / "base.duckdb")
    commit_entry(base, write_spool(Bundle(RunRecord("trace-base", "trace", "h", utc_now_iso(),
                                                    utc_now_iso()), tables), base.spool_dir))
    print("| kernel rows | format | spool ms | commit ms | total ms |\n|---:|---|---:|---:|---:|")
    for rows in (int(r) for r in a.rows.split(",")):
        big = tiled(tables, rows)
        times: dict[str, list[tuple[float, float]]] = {"json": [], "parquet": []}
        for i in range(a.repeat):
            for fmt in times:
                times[fmt].append(once(big, fmt, base.path, i))
        for fmt, v in times.items():
            spool = statistics.median(s for s, _ in v) * 1e3
            commit = statistics.median(c for _, c in v) * 1e3
            total = statistics.median(s + c for s, c in v) * 1e3
            print(f"| {len(big['trace_kernels'])} | {fmt} | {spool:.1f} | {commit:.1f} | "
                  f"{total:.1f} |")
    shutil.rmtree(work, ignore_errors=True)
    print(f"\nfresh process, `import pyarrow, pyarrow.parquet`: "
          f"{import_cost(a.repeat) * 1e3:.1f} ms (median of {a.repeat}; JSON never pays it)")


if __name__ == "__main__":
    main()
