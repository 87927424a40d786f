"""One measurement in a fresh process: load a trace with TOOL, print wall time and peak RSS.

    python benchmarks/trace_measure.py ours|ours_one|ours_two|hta|hta_breakdown|gzip FILE|DIR

``ours`` is the importer as shipped (on an idle core, a large file or a run's rank files
are parsed by this process and a worker, collectors/trace/readers/kineto_split.py and rank_files.py: CPU time
and peak memory add the worker's); ``ours_one`` forced into one process, ``ours_two``
forced to use the worker whatever the load. A DIR holds the rank files of one run. ``hta`` is HTA's loader alone; ``hta_breakdown`` what a user runs for a kernel breakdown:
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


def _ours_one_setup():
    import functools

    ingest_traces = _ours_setup()
    from collectors.trace import ingest
    from collectors.trace.readers import kineto as reader
    from collectors.trace.readers import rank_files as ranks

    ingest.read_trace = functools.partial(reader.read_trace, parallel=False)
    ranks.read_all = lambda files: ((f, None) for f in files)
    return ingest_traces


def _ours_two_setup():
    import functools

    ingest_traces = _ours_setup()
    from collectors.trace import ingest
    from collectors.trace.readers import kineto as reader
    from collectors.trace.readers import rank_files as ranks

    ingest.read_trace = functools.partial(reader.read_trace, parallel=True)
    ranks.spare_cores = lambda: 1  # exactly one worker
    return ingest_traces


def _ours(path: Path, ingest_traces) -> dict:
    result = ingest_traces([path])
    # Arrow tables too, as a big trace's commit spools them (and as stops before 18 built
    # them inside ingest_traces), so the figures stay comparable
    arrow = {name: table.to_arrow() for name, table in result.tables.items()}
    kernels = arrow["trace_kernels"].num_rows
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
    if path.is_dir():  # rank files named ..._rank<N>...
        files = {int(f.name.split("_rank")[1].split(".")[0]): str(f) for f in _files(path)}
        analyzer = trace_analysis(trace_files=files, trace_dir=str(path))
    else:
        analyzer = trace_analysis(trace_files={0: str(path)}, trace_dir=str(path.parent))
    by_kind, by_kernel = analyzer.get_gpu_kernel_breakdown(visualize=False)
    return {"kinds": len(by_kind), "rows": len(by_kernel)}


def _gzip(path: Path, _setup) -> dict:
    with open("/dev/null", "wb") as sink:
        subprocess.run(["gzip", "-dc", *map(str, _files(path))], stdout=sink, check=True)
    return {}


def _files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json.gz")) if path.is_dir() else [path]


def main() -> None:
    tool, path = sys.argv[1], Path(sys.argv[2])
    setup = {"ours": _ours_setup, "ours_one": _ours_one_setup,
             "ours_two": _ours_two_setup, "hta": _hta_setup, "hta_breakdown": _hta_breakdown_setup,
             "gzip": lambda: None}[tool]()  # fmt: skip
    before = _usage()
    t0 = time.perf_counter()
    info = {"ours": _ours, "ours_one": _ours, "ours_two": _ours, "hta": _hta, "hta_breakdown": _hta_breakdown,
            "gzip": _gzip}[tool](path, setup)  # fmt: skip
    wall = time.perf_counter() - t0
    after = _usage()
    # gzip: the child alone; ours: itself plus its parse worker (peak: the two peaks added,
    # as if both were reached at once); HTA: itself (its parse pool, if any, is counted too)
    gz = tool == "gzip"
    cpu = (after[1] - before[1]) + (0 if gz else after[0] - before[0])
    rss = after[3] if gz else after[2] + after[3]
    print(json.dumps({"tool": tool, "file": str(path), "wall_s": wall, "cpu_s": cpu,
                      "cpu_main_s": after[0] - before[0], "peak_rss_mb": rss / 1024,
                      **info}))  # fmt: skip


def _usage() -> tuple[float, float, int, int]:
    """(own CPU seconds, children's, own peak RSS KiB, children's largest)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, me.ru_maxrss,
            kids.ru_maxrss)  # fmt: skip


if __name__ == "__main__":
    main()
