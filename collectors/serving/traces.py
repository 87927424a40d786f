"""Wait until every rank's torch.profiler trace from one ``/stop_profile`` is final (or,
for a server run under Nsight Systems, its report: ``wait_for_report``).

vLLM (and SGLang) write one file per worker into the trace folder; flushing a large trace
takes minutes. A file still being written may carry a ``.tmp`` suffix (a crashed worker
leaves it behind), but a gzipped trace is not renamed: PyTorch's ``export_chrome_trace``
(torch/profiler/profiler.py) writes the JSON to a temporary file and then gzips it straight
into the final ``*.json.gz`` name, as SGLang's ``export_chrome_trace(...trace.json.gz)``
does. So a file is final when it has no ``.tmp`` suffix, its size stopped changing, and its
content is complete: a ``.gz`` whose gzip stream reaches its end marker (decompressed to the
end, once per size), a ``.json`` that ends with ``}`` or ``]``.
"""

from __future__ import annotations

import logging
import time
import zlib
from pathlib import Path

from collectors.core.errors import MeasurementError

TRACE_SUFFIXES = (".json", ".json.gz")


def is_trace_name(name: str) -> bool:
    return name.removesuffix(".tmp").endswith(TRACE_SUFFIXES)


def complete(path: Path) -> bool:
    """Whether a trace file's content is whole (see the module docstring)."""
    try:
        if path.name.endswith(".gz"):
            return _gzip_complete(path)
        with path.open("rb") as fh:
            fh.seek(max(path.stat().st_size - 64, 0))
            return fh.read().rstrip()[-1:] in (b"}", b"]")
    except OSError:
        return False


def _gzip_complete(path: Path, chunk: int = 1 << 20) -> bool:
    """Decompress to the end, discarding output: True only if the last member's trailer is read.

    A stream cut short (still being written) ends without its end-of-stream marker and
    8-byte CRC/size trailer; zlib then reports ``eof`` False.
    """
    d = zlib.decompressobj(wbits=31)
    with path.open("rb") as fh:
        while data := fh.read(chunk):
            while data:
                try:
                    d.decompress(data, 1 << 16)  # bounded output: little memory even for 5 GB
                except zlib.error:
                    return False
                data = d.unconsumed_tail
                if d.eof and d.unused_data:  # another gzip member follows (concatenated streams)
                    data, d = d.unused_data, zlib.decompressobj(wbits=31)
    return d.eof


def snapshot(trace_dir: Path) -> set[str]:
    """Names already in the folder (before /start_profile): never part of this run."""
    return {p.name for p in trace_dir.iterdir() if p.is_file() and is_trace_name(p.name)}


def wait_for_traces(
    trace_dir: Path,
    before: set[str],
    expected: int | None,
    timeout_s: float,
    settle_s: float,
    log: logging.Logger,
    start: float,
    empty_grace_s: float | None,
    empty_why: str,
    poll_s: float = 0.5,
    progress_every_s: float = 5.0,
) -> tuple[list[Path], float]:
    """The new final trace files once complete, and the seconds waited since ``start`` (a
    ``time.monotonic()``: when /stop_profile was sent); MeasurementError on timeout.

    Complete: ``expected`` final files (when the world size is known), else at least one
    final file and nothing new, growing or ``.tmp`` for ``settle_s`` seconds. With
    ``empty_grace_s``, a folder where no file at all appeared by then fails at once
    (``empty_why`` says why that means no trace will come).
    """
    sizes: dict[str, int] = {}
    checked: dict[str, tuple[int, bool]] = {}  # name -> (size, complete) already decided
    stable_since: float | None = None
    last_report = start
    while True:
        now = time.monotonic()
        current = {p.name: p.stat().st_size for p in _list(trace_dir)
                   if p.name not in before and is_trace_name(p.name)}  # fmt: skip
        tmp = sorted(n for n in current if n.endswith(".tmp"))
        final = sorted(n for n in current if not n.endswith(".tmp"))
        unchanged = current == sizes and bool(current)
        sizes = current
        stable_since = (stable_since or now) if unchanged else None
        stable_for = 0.0 if stable_since is None else now - stable_since
        whole = stable_for >= max(poll_s, 0.0) and all(
            _complete_cached(trace_dir / n, sizes[n], checked) for n in final)
        enough = stable_for >= settle_s if expected is None else len(final) >= expected
        if final and not tmp and whole and enough:
            return [trace_dir / n for n in final], now - start
        if empty_grace_s is not None and not current and now - start > empty_grace_s:
            raise MeasurementError(
                f"{trace_dir}: no trace file appeared within {empty_grace_s:g} s of a "
                f"successful /stop_profile{empty_why}"
            )
        if now - start > timeout_s:
            raise MeasurementError(_timeout_message(trace_dir, final, tmp, expected, timeout_s))
        if now - last_report >= progress_every_s:
            last_report = now
            mb = sum(sizes.values()) / 1e6
            want = f"/{expected}" if expected else ""
            log.info(f"waiting for trace files in {trace_dir}: {len(final)}{want} final, "
                     f"{len(tmp)} still .tmp, {mb:.1f} MB, {now - start:.0f} s of "
                     f"{timeout_s:.0f} s")  # fmt: skip
        time.sleep(poll_s)


def _complete_cached(path: Path, size: int, checked: dict[str, tuple[int, bool]]) -> bool:
    if checked.get(path.name, (None, False))[0] != size:
        checked[path.name] = (size, complete(path))
    return checked[path.name][1]


def _list(trace_dir: Path) -> list[Path]:
    try:
        return [p for p in trace_dir.iterdir() if p.is_file()]
    except OSError:
        return []


def _timeout_message(
    trace_dir: Path, final: list[str], tmp: list[str], expected: int | None, timeout_s: float
) -> str:
    if not final and not tmp:
        return (
            f"{trace_dir}: no trace file appeared within {timeout_s:g} s of /stop_profile; "
            "is this the server's torch_profiler_dir, on this machine?"
        )
    if tmp:
        return (
            f"{trace_dir}: {len(tmp)} trace file(s) still .tmp after {timeout_s:g} s "
            f"({', '.join(tmp[:3])}): the flush has not finished or the worker crashed; "
            "raise --flush-timeout, or ingest later with: python -m collectors trace "
            f"{trace_dir}"
        )
    return (
        f"{trace_dir}: only {len(final)} of {expected} rank trace files appeared within "
        f"{timeout_s:g} s ({', '.join(final[:3])})"
    )


# What ``nsys profile -o NAME`` leaves: NAME.nsys-rep, and NAME.sqlite with ``--export
# sqlite`` (.qdrep before nsys 2021.4); with ``--capture-range-end repeat`` one per range.
REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".sqlite")


def newest_report(path: Path, since: float) -> Path | None:
    """The newest Nsight Systems report written at or after ``since`` (a ``time.time()``):
    ``path`` itself, a report named as ``path`` (``report1`` -> ``report1.nsys-rep``,
    ``report1.2.nsys-rep``...), or, for a folder, any report in it."""
    if path.is_dir():
        folder, stem = path, ""
    else:
        folder, stem = path.parent, path.name
        for suffix in REPORT_SUFFIXES:
            stem = stem.removesuffix(suffix)
    found = []
    for p in _list(folder):
        if p.name.startswith(stem) and p.name.endswith(REPORT_SUFFIXES):
            try:
                mtime = p.stat().st_mtime
            except OSError:
                continue
            if mtime >= since:
                found.append((mtime, p.name.endswith(".sqlite"), p))
    return max(found)[2] if found else None  # the export when both are this new


def sqlite_complete(path: Path) -> bool:
    """Whether a SQLite file is whole: no rollback journal or WAL beside it (a writer is at
    work) and its size is what its header says (sqlite.org/fileformat2.html: the page size
    at offset 16, the page count at 28, valid while the change counter at 24 equals the
    version-valid-for number at 92; before SQLite 3.7.0, whole pages)."""
    if any(path.with_name(path.name + s).exists() for s in ("-journal", "-wal")):
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(100)
        size = path.stat().st_size
    except OSError:
        return False
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return False
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if pages and head[24:28] == head[92:96]:
        return size == pages * page
    return page > 0 and size % page == 0


def wait_for_report(path: Path, since: float, timeout_s: float, settle_s: float,
                    log: logging.Logger, start: float, poll_s: float = 0.5) -> tuple[Path, float]:  # fmt: skip
    """The report nsys writes once the capture range ends (after /stop_profile), when its
    size has not changed for ``settle_s`` and, for a SQLite export, its content is whole
    (``sqlite_complete``: an export is written in place, page by page); and the seconds
    waited since ``start``. An ``.nsys-rep`` is nsys's own format: its size alone says."""
    size, stable_since, last_report = -1, 0.0, start
    while True:
        now = time.monotonic()
        found = newest_report(path, since)
        current = found.stat().st_size if found is not None and found.exists() else -1
        if current != size or current <= 0:
            size, stable_since = current, now
        elif now - stable_since >= settle_s and (
                not found.name.endswith(".sqlite") or sqlite_complete(found)):  # fmt: skip
            return found, now - start
        if now - start > timeout_s:
            if found is not None:
                raise MeasurementError(
                    f"{found}: the Nsight Systems report is not whole {timeout_s:g} s after "
                    f"/stop_profile ({current / 1e6:.1f} MB, still being written or cut "
                    "short); raise --flush-timeout, or import it later with: python -m "
                    f"collectors trace {found}"
                )  # fmt: skip
            raise MeasurementError(
                f"{path}: no Nsight Systems report written within {timeout_s:g} s of "
                "/stop_profile; is the server running under `nsys profile "
                "--capture-range=cudaProfilerApi --capture-range-end=repeat -o NAME ...`, "
                "and is --nsys-report that NAME (or its folder) on this machine?"
            )
        if now - last_report >= 5.0:
            last_report = now
            state = f"{found.name}, {current / 1e6:.1f} MB" if found else "none yet"
            log.info(f"waiting for the nsys report ({state}), {now - start:.0f} s of "
                     f"{timeout_s:.0f} s")  # fmt: skip
        time.sleep(poll_s)
