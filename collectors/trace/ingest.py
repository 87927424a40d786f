"""Trace files -> trace_* tables and the summary: the one entry point for every importer.

``ingest_traces`` is shared by ``trace``, ``profile`` and the serving profilers. One call
is one run: its files are the ranks of one job. A file is read by what it holds: a SQLite
database is an Nsight Systems export (readers/nsys.py; one rank per process and GPU in
it), an ``.nsys-rep`` report is exported first (readers/nsys_export.py), anything else is
a Kineto trace (readers/kineto.py).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.core import inputs
from collectors.core.errors import InputError
from collectors.trace.columns import RawTrace, implausible
from collectors.trace.readers.kineto import NotATrace, read_trace
from collectors.trace.readers.nsys_export import REPORT_SUFFIXES

TRACE_SUFFIXES = (".json", ".json.gz", ".tmp", ".sqlite", *REPORT_SUFFIXES)
# vLLM `..._rank3.<ns>.pt.trace.json.gz`, older `instance-rank-3...`, `rank_3`, `rank-3`
# vLLM >= 0.10 also writes the API frontend's CPU-only trace into the same folder
# (vllm/v1/engine/async_llm.py: worker_name=f"{hostname}_{pid}.async_llm"); it is no rank
_FRONTEND = re.compile(r"\.async_llm\.")
_RANK_IN_NAME = re.compile(r"(?:^|[_\-.])rank[-_]?(\d+)(?=[._-]|$)", re.IGNORECASE)
# torch.profiler.tensorboard_trace_handler's default file name (pytorch
# torch/profiler/profiler.py): f"{socket.gethostname()}_{os.getpid()}.{time.time_ns()}"
# ".pt.trace.json[.gz]": the host that recorded the trace
_HOST_IN_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.-]*)_\d+\.\d{10,}\.pt\.trace\.json")


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
                raise InputError(f"{p}: no trace files (*.json, *.json.gz, *.tmp, *.sqlite, "
                                 "*.nsys-rep) in the directory")  # fmt: skip
            files += found
            walked.update(found)
        else:
            inputs.check_file(p, "a trace file", folders_ok=True)  # a FIFO is named, not read
            files.append(p)
    unique = inputs.unique(dict.fromkeys(f.resolve() for f in files))
    return unique, {f.resolve() for f in walked}


def recording_host(raw: RawTrace) -> str | None:
    """The host that recorded a rank, when its file says: an nsys export's
    ``TARGET_INFO_SYSTEM_ENV`` Hostname, else torch's default ``{host}_{pid}.{ns}`` name."""
    nsys = raw.meta.get("nsys")
    if isinstance(nsys, dict) and nsys.get("Hostname"):
        return str(nsys["Hostname"])
    m = _HOST_IN_NAME.match(raw.path.name)
    return m.group(1) if m else None


def rank_from_name(path: Path) -> int | None:
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def assign_ranks(items: list[tuple[Path, dict]], warnings: list[str]) -> list[tuple[int, str]]:
    """(rank, source) per (path, distributedInfo): its rank, else the file name, else order.

    Ranks that share a file (an nsys report of several GPUs) take the order they come in
    (device order), never the file's name; all from one file say so (``device``)."""
    out: list[tuple[int | None, str]] = []
    taken: dict[int, Path] = {}
    paths = [p for p, _d in items]
    one_file = len(set(paths)) == 1 and len(items) > 1
    for path, dist in items:
        rank, src = dist.get("rank"), "distributedInfo"
        if not isinstance(rank, int) or isinstance(rank, bool):
            rank = rank_from_name(path) if paths.count(path) == 1 else None
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
            if one_file:
                src = "device"
            elif len(items) > 1:  # a lone file is rank 0 without further ado
                warnings.append(
                    f"{path}: no rank in distributedInfo or the file name; assumed rank "
                    f"{rank} from the file order"
                )
        final.append((rank, src))
    return final


def read_ranks(files: list[Path], walked: set[Path], warnings: list[str]) -> list[RawTrace]:
    """Every rank the files hold, in file order (an nsys export may hold several). A file
    met by walking a directory that turns out to be no trace is skipped, with a warning;
    one with no complete event to analyse too (for a named lone file it is an error)."""
    from collectors.trace.readers import nsys, nsys_export, nsys_schema
    from collectors.trace.readers import rank_files as ranks

    def is_nsys(f: Path) -> bool:
        try:
            return nsys_export.is_report(f) or nsys_schema.is_sqlite(f)
        except OSError:
            return False  # the Kineto reader says what is wrong with it

    nsys_files = {f for f in files if is_nsys(f)}
    # several Kineto ranks: worker processes read every other file
    read = dict(ranks.read_all([f for f in files if f not in nsys_files]))
    out: list[RawTrace] = []
    refused: list[str] = []
    for f in files:
        try:
            if f in nsys_files:
                sqlite = nsys_export.sqlite_for(f) if nsys_export.is_report(f) else f
                raws = nsys.read_nsys(sqlite)
            else:
                raws = [read.get(f) or read_trace(f)]
        except NotATrace as exc:
            if f not in walked:
                raise
            warnings.append(f"skipped {f}: {exc.reason}")
            continue
        why = (_nothing_to_analyse(raws[0]) if raws else "no GPU event (kernel, memcpy or "
               "memset) in the export: was CUDA traced (nsys profile --trace=cuda,nvtx)?")  # fmt: skip
        if why:
            refused.append(f"{f}: {why}")
            warnings.append(f"skipped {f}: {why}")
            continue
        for raw in raws:
            if problem := implausible(raw):
                raise InputError(problem)
            if raw.partial:
                warnings.append(f"{f}: partial trace: {raw.partial_reason}")
        out += raws
    if not out and len(refused) == 1:
        raise InputError(refused[0])
    return out


def _nothing_to_analyse(raw: RawTrace) -> str | None:
    """Why a Kineto file gives no rank (None: it does). Refused: no events at all; no
    complete GPU event nor CPU op; a cut-off file that kept no GPU event (Kineto writes a
    GPU trace's kernels after most CPU ops: its CPU ops alone would pass for the run).
    A whole trace without GPU events is a CPU-only profile, analysed on its CPU ops."""
    if raw.events_total == 0:  # a profiler that recorded nothing, or died before it did
        return "no events in traceEvents"
    if len(raw.g_ts):
        return None
    if not len(raw.c_ts):
        cut = f" ({raw.partial_reason})" if raw.partial else ""
        return f"no complete GPU event (kernel, memcpy or memset) nor CPU op{cut}"
    if raw.partial:
        return (f"no complete GPU event (kernel, memcpy or memset) before the file ends "
                f"({raw.partial_reason}): its CPU ops alone are not the run")  # fmt: skip
    return None


def ingest_traces(paths: list[Path], log: logging.Logger | None = None) -> TraceIngest:
    """Read, analyse and tabulate the trace files of one run (raises InputError)."""
    from collectors.trace import analyze, tables

    log = log or logging.getLogger("stepscope.trace")
    files, walked = find_trace_files(list(paths))
    warnings: list[str] = []
    frontend = [f for f in files if _FRONTEND.search(f.name)]
    warnings += [f"skipped {f}: vLLM's frontend (AsyncLLM) CPU trace, not a rank" for f in frontend]
    files = [f for f in files if f not in frontend]
    results = []
    for raw in read_ranks(files, walked, warnings):
        result = analyze.analyze(raw)
        f = raw.path
        if result.steps_without_gpu:
            warnings.append(f"{f}: {result.steps_without_gpu} step(s) launched no GPU work "
                            "(no window of their own): left out of the steps")  # fmt: skip
        log.info(
            f"{f.name}: {raw.events_total} events, {raw.events_kept} kept, "
            f"{len(raw.g_ts)} GPU events, {len(result.steps)} steps"
        )
        results.append(result)
    if not results:
        what = ("only vLLM's frontend (*.async_llm.*) trace, no worker traces" if frontend
                else "no trace file holds a complete GPU event or CPU op")  # fmt: skip
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
    hosts = [h for r in results if (h := recording_host(r.raw))]
    nsys = next((r.raw.meta["nsys"] for r in results if "nsys" in r.raw.meta), {})
    run_info.update(hosts=list(dict.fromkeys(hosts)), os=nsys.get("OsDescription"),
                    cpu=nsys.get("CpuDescription"), nsys_version=nsys.get("version"))  # fmt: skip
    partial_files = [r.raw.path.name for r in results if r.raw.partial]
    message = (f"partial: {', '.join(partial_files)} ended early (unterminated trace); "
               "complete events kept") if partial_files else None  # fmt: skip
    return TraceIngest(tables=built, summary=summary, partial=bool(partial_files),
                       message=message, digest=digest, warnings=warnings, run_info=run_info)
