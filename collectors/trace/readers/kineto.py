"""Read one Kineto (PyTorch profiler) trace file, plain or gzip, into a RawTrace.

The parse itself is ``scanner.scan`` (one streaming pass; see there how most of a file is
skipped unparsed); a large file is shared by several processes (``split``). When the
file's header guessed wrong (devices listed, no GPU activity; runtime calls spelled in
another key order), the file is read again with every CPU op or runtime call kept.
"""

from __future__ import annotations

from pathlib import Path

from collectors.core.errors import InputError
from collectors.trace.columns import NotATrace, RawTrace
from collectors.trace.readers import kineto_split as split
from collectors.trace.readers.kineto_scan import scan
from collectors.trace.readers.source import gzip_problem

__all__ = ["NotATrace", "RawTrace", "read_trace"]


def read_trace(path: Path, all_cpu_ops: bool | None = None, all_runtime: bool = False,
               parallel: bool | int | None = None, block: int = 0) -> RawTrace:  # fmt: skip
    """Stream one trace file into a RawTrace; raise InputError on unusable input.

    ``all_cpu_ops``: keep every CPU op (CPU-only traces are analysed on them); None
    decides from the header and re-reads the file if the guess was wrong. ``all_runtime``:
    keep every runtime call, not only launches (a fallback, see scanner._LAUNCHES). ``parallel``:
    share the chunks with worker processes (``split``): True one, an int that many; None:
    as many as the file's size and the idle cores make worth it. ``block``: read size
    (tests: many small chunks).
    """
    if parallel is None:
        parallel = split.workers_for(path)
    try:
        if parallel:
            raw, all_cpu_ops = split.read_parallel(path, all_cpu_ops, all_runtime, block,
                                                   workers=int(parallel))  # fmt: skip
        else:
            raw, all_cpu_ops = scan(path, all_cpu_ops, all_runtime, block=block)
    except InputError as exc:
        # bytes a corrupt gzip stream inflated to fail as JSON before the stream's own check
        # (its CRC at the end) is reached: the gzip is what is wrong, say so
        why = None if "gzip" in str(exc) else gzip_problem(path)
        if why:
            raise InputError(f"{path}: corrupt gzip data ({why})") from None
        raise
    if all_cpu_ops is False and not len(raw.g_ts):  # devices listed, but no GPU activity
        del raw  # the second reading does not hold the first one's columns too
        return read_trace(path, all_cpu_ops=True, parallel=parallel, block=block)
    if not all_runtime and len(raw.g_ts) and not len(raw.r_ts) and max(raw.g_corr) >= 0:
        del raw
        return read_trace(path, all_cpu_ops, all_runtime=True, parallel=parallel, block=block)
    return raw
