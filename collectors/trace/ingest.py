"""Trace files -> trace_* tables and the summary: the one entry point for every importer.

``ingest_traces`` is shared by ``trace``, ``profile`` and the vLLM profiler helper. One
call is one run: its files are the ranks of one job.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.core.errors import InputError
from collectors.trace.readers.kineto import NotATrace, read_trace

TRACE_SUFFIXES = (".json", ".json.gz", ".tmp")
# vLLM `..._rank3.<ns>.pt.trace.json.gz`, older `instance-rank-3...`, `rank_3`, `rank-3`
# vLLM >= 0.10 also writes the API frontend's CPU-only trace into the same folder
# (vllm/v1/engine/async_llm.py: worker_name=f"{hostname}_{pid}.async_llm"); it is no rank
_FRONTEND = re.compile(r"\.async_llm\.")
_RANK_IN_NAME = re.compile(r"(?:^|[_\-.])rank[-_]?(\d+)(?=[._-]|$)", re.IGNORECASE)


@dataclass
class TraceIngest:
    tables: dict[str, Any]  # bundle tables (no run_id column)
    summary: dict[str, Any]  # ranks, steps, partial, categories, per_rank (issue 3 item 7)
    partial: bool
    message: str | None  # one line, e.g. why partial
    digest: str  # content digest of the input files (for content_run_id)
    warnings: list[str] = field(default_factory=list)
    run_info: dict[str, Any] = field(default_factory=dict)  # world_size, backend, devices...


def find_trace_files(paths: list[Path]) -> tuple[list[Path], set[Path]]:
    """Files named on the command line, plus trace-looking files inside directories.

    Returns (files, from_directories): files found by walking a directory may be skipped
    when they turn out not to be traces; files named explicitly may not.
    """
    files: list[Path] = []
    walked: set[Path] = set()
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*")
                           if f.is_file() and f.name.endswith(TRACE_SUFFIXES))  # fmt: skip
            if not found:
                raise InputError(f"{p}: no trace files (*.json, *.json.gz, *.tmp) in the directory")
            files += found
            walked.update(found)
        elif p.is_file():
            files.append(p)
        elif p.exists():
            raise InputError(f"{p}: not a regular file")
        else:
            raise InputError(f"{p}: no such file or directory")
    unique = list(dict.fromkeys(f.resolve() for f in files))
    return unique, {f.resolve() for f in walked}


def rank_from_name(path: Path) -> int | None:
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def assign_ranks(items: list[tuple[Path, dict]], warnings: list[str]) -> list[tuple[int, str]]:
    """(rank, source) per (path, distributedInfo): its rank, else the file name, else order."""
    out: list[tuple[int | None, str]] = []
    taken: dict[int, Path] = {}
    for path, dist in items:
        rank, src = dist.get("rank"), "distributedInfo"
        if not isinstance(rank, int) or isinstance(rank, bool):
            rank = rank_from_name(path)
            src = "order" if rank is None else "filename"
        if rank in taken:
            raise InputError(f"{taken[rank]} and {path} both claim rank {rank}")
        if rank is not None:
            taken[rank] = path
        out.append((rank, src))
    final: list[tuple[int, str]] = []
    free = 0
    for (rank, src), (path, _dist) in zip(out, items, strict=True):
        if rank is None:
            while free in taken:
                free += 1
            rank = free
            taken[rank] = path
            if len(items) > 1:  # a lone file is rank 0 without further ado
                warnings.append(
                    f"{path}: no rank in distributedInfo or the file name; assumed rank "
                    f"{rank} from the file order"
                )
        final.append((rank, src))
    return final


def ingest_traces(paths: list[Path], log: logging.Logger | None = None) -> TraceIngest:
    """Read, analyse and tabulate the trace files of one run (raises InputError)."""
    from collectors.trace import analyze, tables
    from collectors.trace.readers import rank_files as ranks

    log = log or logging.getLogger("stepscope.trace")
    files, walked = find_trace_files(list(paths))
    warnings: list[str] = []
    results = []
    empty: list[Path] = []
    frontend = [f for f in files if _FRONTEND.search(f.name)]
    warnings += [f"skipped {f}: vLLM's frontend (AsyncLLM) CPU trace, not a rank" for f in frontend]
    files = [f for f in files if f not in frontend]
    for f, raw in ranks.read_all(files):  # several ranks: a worker reads every other file
        try:
            raw = raw if raw is not None else read_trace(f)
        except NotATrace as exc:
            if f not in walked:
                raise
            warnings.append(f"skipped {f}: {exc.reason}")
            continue
        if raw.events_total == 0:  # a profiler that recorded nothing, or died before it did
            empty.append(f)
            warnings.append(f"skipped {f}: no events in traceEvents")
            continue
        if raw.partial:
            warnings.append(f"{f}: partial trace: {raw.partial_reason}")
        result = analyze.analyze(raw)
        if result.steps_without_gpu:
            warnings.append(f"{f}: {result.steps_without_gpu} step(s) launched no GPU work "
                            "(no window of their own): left out of the steps")  # fmt: skip
        log.info(
            f"{f.name}: {raw.events_total} events, {raw.events_kept} kept, "
            f"{len(raw.g_ts)} GPU events, {len(result.steps)} steps"
        )
        results.append(result)
    if not results:
        what = ("no events in traceEvents: the profiler recorded nothing" if empty
                else "only vLLM's frontend (*.async_llm.*) trace, no worker traces" if frontend
                else "no trace files with traceEvents")  # fmt: skip
        raise InputError(f"{', '.join(map(str, paths))}: {what}")
    ranks = assign_ranks([(r.raw.path, r.raw.dist) for r in results], warnings)
    for w in warnings:
        log.warning(w)
    order = sorted(range(len(results)), key=lambda i: ranks[i][0])
    results = [results[i] for i in order]
    ranks = [ranks[i] for i in order]
    built, summary, run_info = tables.build(results, ranks)
    digest = hashlib.sha256(
        "\n".join(f"{rank}:{r.raw.digest}" for (rank, _), r in zip(ranks, results, strict=True))
        .encode()
    ).hexdigest()  # fmt: skip
    partial_files = [r.raw.path.name for r in results if r.raw.partial]
    message = (f"partial: {', '.join(partial_files)} ended early (unterminated trace); "
               "complete events kept") if partial_files else None  # fmt: skip
    return TraceIngest(tables=built, summary=summary, partial=bool(partial_files),
                       message=message, digest=digest, warnings=warnings, run_info=run_info)
