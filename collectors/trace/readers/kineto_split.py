"""Large traces on several cores: this process and its workers each parse a share of chunks.

Every process streams the whole file (inflating gzip costs ~1/8 of the parse with ISA-L)
and cuts it at the same event boundaries, since the cuts depend only on the bytes: with
N processes, chunk ``i`` of the events array is parsed by process ``i % N`` (this one is
0, and also takes the last chunk, the trailer and the header's decisions). Each worker
returns its columns with, after each of its chunks, how long every column was; the merge
interleaves the slices in chunk order and renumbers names and threads in order of first
appearance, so the result is the RawTrace a single pass builds, field for field
(tests/trace/test_split.py). Any failure, in any process, reads the file again in one
pass, which raises the same error a single pass would.

Workers are ``python -m collectors.trace.readers.kineto_split`` (fresh interpreters: nothing of the
caller's state, threads or CUDA context is forked), importing only the scanner. One per
idle core and per 32 MB of JSON, at most 7: each inflates the whole file, so past ~8
processes the inflate, not the parse, sets the time.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from collectors.trace.columns import (
    CPU_COLUMNS,
    GPU_COLUMNS,
    LIST_FIELDS,
    RUNTIME_COLUMNS,
    RawTrace,
    intern,
)
from collectors.trace.readers.kineto_scan import Part, scan, truncation_note
from collectors.trace.readers.source import is_gzip

# Below this many bytes of JSON per process a worker's start (~0.1 s) costs more than it saves
MIN_JSON_BYTES = 32 << 20
MAX_WORKERS = 7
_GZIP_RATIO = 12  # a Kineto trace inflates 13-20x; be conservative
# Smaller reads than one pass uses (~1 MB of JSON per chunk, not ~8 MB): the two shares
# stay even on files of a few dozen chunks; per chunk overhead is negligible
_BLOCK_GZ, _BLOCK_PLAIN = 64 << 10, 1 << 20
_COLUMNS = (*GPU_COLUMNS, *CPU_COLUMNS, *RUNTIME_COLUMNS)
# the columns of name ids (renumbered by the merge, as c_tid's thread indices are)
_NAME_COLUMNS = {"g_name", "g_coll", "g_dtype", "c_name", "c_dtype"}


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def spare_cores() -> int:
    """Cores a worker could use now: the idle ones (the 1-minute load average, which counts
    this import for up to 1) rounded up past half a core, at most all but this process's
    own, and none without an interpreter to start. On a busy machine a worker only adds
    its start and a second inflate: measured +10-50% CPU and a slower wall time at a load
    of 4-5 on 2 cores (docs/benchmarks.md)."""
    n = cores()
    if n < 2 or not sys.executable:
        return 0
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform: assume idle
        return n - 1
    return max(0, min(n - 1, math.ceil(n - 0.5 - load)))


def workers_for(path: Path) -> int:
    """Workers worth starting for one file: one per idle core and per MIN_JSON_BYTES of
    JSON beyond the first (a smaller file is done before a worker has started), at most
    MAX_WORKERS; 0 means one pass."""
    spare = spare_cores()
    if not spare:
        return 0
    try:
        size = path.stat().st_size
        gz = is_gzip(path)
    except OSError:
        return 0  # the single pass reports it
    json_bytes = size * (_GZIP_RATIO if gz else 1)
    return min(spare, MAX_WORKERS, json_bytes // MIN_JSON_BYTES)


def read_parallel(path: Path, all_cpu_ops: bool | None, all_runtime: bool,
                  block: int = 0, workers: int = 1) -> tuple[RawTrace, bool | None]:  # fmt: skip
    """``scanner.scan`` on 1 + ``workers`` processes; falls back to one pass on any failure."""
    if not block:
        try:
            block = _BLOCK_GZ if is_gzip(path) else _BLOCK_PLAIN
        except OSError:
            return scan(path, all_cpu_ops, all_runtime)  # raises the one-pass error
    parts = workers + 1
    procs: list[subprocess.Popen] = []
    try:
        for k in range(1, parts):
            how = json.dumps([str(path), all_cpu_ops, all_runtime, block, k, parts])
            procs.append(start_worker("collectors.trace.readers.kineto_split", how))
    except OSError:  # no workers today: one pass
        stop_workers(procs)
        return scan(path, all_cpu_ops, all_runtime)
    part = Part(mine=0, parts=parts)
    shares: list[tuple[RawTrace, list[tuple[int, ...]]]] = []
    try:
        raw, used = scan(path, all_cpu_ops, all_runtime, part, block)
        shares.append((raw, part.marks))
        del raw
        shares += [receive(proc) for proc in procs]  # a worker's error: one pass raises it
        return merge(shares), used
    except Exception:  # noqa: BLE001 - whatever went wrong, one pass is the reference
        stop_workers(procs)
        shares.clear()
        return scan(path, all_cpu_ops, all_runtime)
    except BaseException:  # KeyboardInterrupt: no orphan workers
        stop_workers(procs)
        raise


def start_worker(module: str, arg: str) -> subprocess.Popen:
    """``python -m MODULE ARG`` with this project on PYTHONPATH; its stdout is piped back."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", module, arg],
                            env={**os.environ, "PYTHONPATH": path},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip


def send(raw: RawTrace, marks: list[tuple[int, ...]], out: BinaryIO) -> None:
    """A worker's share on ``out``: its length, the pickled RawTrace without its columns
    (names, lists, counts) with the marks and the columns' sizes, then each column's raw
    bytes. Never the whole share as one pickle: that held it twice in the worker and
    three times in the caller (docs/benchmarks.md, Import memory)."""
    columns = {key: getattr(raw, key) for key in _COLUMNS}
    for key, col in columns.items():
        setattr(raw, key, array(col.typecode))
    head = pickle.dumps((raw, marks, {k: len(c) * c.itemsize for k, c in columns.items()}),
                        protocol=pickle.HIGHEST_PROTOCOL)  # fmt: skip
    out.write(len(head).to_bytes(8, "little"))
    out.write(head)
    for key in _COLUMNS:
        out.write(memoryview(columns.pop(key)))  # each column freed once written
    out.flush()


def receive(proc: subprocess.Popen) -> tuple[RawTrace, list[tuple[int, ...]]]:
    """A worker's share (``send``), read a piece at a time; raises if it failed."""
    pipe = proc.stdout
    assert pipe is not None
    size = int.from_bytes(b"".join(_pieces(pipe, 8)), "little")
    raw, marks, sizes = pickle.loads(b"".join(_pieces(pipe, size)))
    for key in _COLUMNS:
        col = array(getattr(raw, key).typecode)
        for piece in _pieces(pipe, sizes[key]):
            col.frombytes(piece)
        setattr(raw, key, col)
    extra = pipe.read(1)
    pipe.close()
    if extra or proc.wait() != 0:
        raise RuntimeError(f"worker exited with {proc.returncode}")
    return raw, marks


def _pieces(pipe: BinaryIO, n: int) -> Iterator[bytes]:
    """The next ``n`` bytes of ``pipe`` in pieces of at most 16 MB (never ``n`` at once)."""
    while n > 0:
        piece = pipe.read(min(n, 16 << 20))
        if not piece:
            raise RuntimeError("a worker's share ended early")
        n -= len(piece)
        yield piece


def stop_workers(procs: list[subprocess.Popen]) -> None:
    """Kill the workers still running (a finished one has nothing left to stop)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def merge(shares: list[tuple[RawTrace, list[tuple[int, ...]]]]) -> RawTrace:
    """The RawTrace of one pass, from every process's columns and marks (this one first)."""
    import numpy as np

    mine = shares[0][0]
    sources = [raw for raw, _marks in shares]
    marks = [m for _raw, m in shares]
    out = RawTrace(path=mine.path, size_bytes=mine.size_bytes, digest=mine.digest,
                   partial=mine.partial, partial_reason=mine.partial_reason, meta=mine.meta,
                   events_total=sum(r.events_total for r in sources),
                   events_kept=sum(r.events_kept for r in sources))  # fmt: skip
    if out.partial_reason:  # the note counted this process's events only
        out.partial_reason = out.partial_reason.replace(
            truncation_note(mine.events_kept), truncation_note(out.events_kept)
        )
    order = sorted((m[0], src, k) for src, ms in enumerate(marks) for k, m in enumerate(ms))
    spans = []  # (source, previous mark, this mark) in chunk order
    name_ids: dict[str, int] = {}
    tid_ids: dict[Any, int] = {}
    name_map: list[list[int]] = [[] for _ in sources]  # local id -> merged id, per source
    tid_map: list[list[int]] = [[] for _ in sources]
    zero = (0,) * (4 + len(LIST_FIELDS) + 2)
    for _chunk, src, k in order:
        raw = sources[src]
        prev, cur = (marks[src][k - 1] if k else zero), marks[src][k]
        # a name first met in this chunk (of this source) gets the next merged id: that is
        # the order of first appearance over the whole file, as one pass numbers them
        for name in raw.names[prev[-2] : cur[-2]]:
            name_map[src].append(intern(name_ids, out.names, name))
        for tid in raw.tids[prev[-1] : cur[-1]]:
            tid_map[src].append(intern(tid_ids, out.tids, tid))
        spans.append((src, prev, cur))
    # -1 (no name) indexes the extra last entry
    names_np = [np.array([*m, -1], dtype=np.int64) for m in name_map]
    tids_np = [np.array([*m, -1], dtype=np.int64) for m in tid_map]
    # one column at a time, each source's freed once merged: the shares and one merged
    # column are held at once, not the shares and the whole merged trace
    for columns, at in ((GPU_COLUMNS, 1), (CPU_COLUMNS, 2), (RUNTIME_COLUMNS, 3)):
        for key in columns:
            for src, prev, cur in spans:
                _copy(out, sources[src], key, prev[at], cur[at], names_np[src], tids_np[src])
            for raw in sources:
                setattr(raw, key, array(getattr(raw, key).typecode))
    for src, prev, cur in spans:
        raw = sources[src]
        for i, key in enumerate(LIST_FIELDS, start=4):
            rows = getattr(raw, key)[prev[i] : cur[i]]
            if key == "comm_annotation_dtypes":  # (ts, name, label name id)
                rows = [(ts, n, int(names_np[src][label])) for ts, n, label in rows]
            getattr(out, key).extend(rows)
    return out


def _copy(out: RawTrace, raw: RawTrace, key: str, a: int, b: int, names: Any,
          tids: Any) -> None:  # fmt: skip
    import numpy as np

    col = getattr(raw, key)
    if key == "c_tid" or key in _NAME_COLUMNS:
        local = np.frombuffer(col, dtype=f"i{col.itemsize}")[a:b]
        merged = (tids if key == "c_tid" else names)[local]
        getattr(out, key).frombytes(merged.astype(f"i{col.itemsize}").tobytes())
    else:
        getattr(out, key).extend(col[a:b])


def main() -> None:
    """A worker: parse chunks k, k + N, ...; write (columns, marks) as a pickle on stdout."""
    path, all_cpu_ops, all_runtime, block, mine, parts = json.loads(sys.argv[1])
    part = Part(mine=mine, parts=parts)
    raw, _used = scan(Path(path), all_cpu_ops, all_runtime, part, block)
    send(raw, part.marks, sys.stdout.buffer)


if __name__ == "__main__":
    main()
