"""One measurement in a fresh process: load a trace with TOOL, print wall time and peak RSS.

    python benchmarks/trace_measure.py ours|hta|hta_breakdown|gzip FILE

``hta`` is HTA's loader alone; ``hta_breakdown`` what a user runs for a kernel breakdown:
``TraceAnalysis(trace_files={0: FILE})`` (load, parse, symbol table, correlation) then
``get_gpu_kernel_breakdown(visualize=False)``.

Run by ``benchmarks.trace_ingest``; ``hta`` runs in the benchmark's own venv (.venv-bench),
so this file imports nothing from the project at module level.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def _ours_setup():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import pyarrow  # noqa: F401 - imported up front: we time the load, not the imports

    from collectors.trace.ingest import ingest_traces

    return ingest_traces


def _ours(path: Path, ingest_traces) -> dict:
    result = ingest_traces([path])
    kernels = result.tables["trace_kernels"].num_rows
    return {"gpu_events": kernels, "steps": result.summary["steps"]}


def _hta_setup():
    import logging

    logging.disable(logging.WARNING)  # HTA logs every phase at WARNING
    from hta.common.trace import parse_trace_file

    return parse_trace_file


def _hta(path: Path, parse_trace_file) -> dict:
    _meta, df, _symbols = parse_trace_file(str(path))
    return {"rows": len(df)}


def _hta_breakdown_setup():
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis


def _hta_breakdown(path: Path, trace_analysis) -> dict:
    analyzer = trace_analysis(trace_files={0: str(path)}, trace_dir=str(path.parent))
    by_kind, by_kernel = analyzer.get_gpu_kernel_breakdown(visualize=False)
    return {"kinds": len(by_kind), "rows": len(by_kernel)}


def _gzip(path: Path, _setup) -> dict:
    with open("/dev/null", "wb") as sink:
        subprocess.run(["gzip", "-dc", str(path)], stdout=sink, check=True)
    return {}


def main() -> None:
    tool, path = sys.argv[1], Path(sys.argv[2])
    setup = {"ours": _ours_setup, "hta": _hta_setup, "hta_breakdown": _hta_breakdown_setup,
             "gzip": lambda: None}[tool]()  # fmt: skip
    who = resource.RUSAGE_CHILDREN if tool == "gzip" else resource.RUSAGE_SELF
    before = resource.getrusage(who)
    t0 = time.perf_counter()
    info = {"ours": _ours, "hta": _hta, "hta_breakdown": _hta_breakdown,
            "gzip": _gzip}[tool](path, setup)  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(who)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(json.dumps({"tool": tool, "file": str(path), "wall_s": wall, "cpu_s": cpu,
                      "peak_rss_mb": after.ru_maxrss / 1024, **info}))  # fmt: skip


if __name__ == "__main__":
    main()
