"""Compact columns for the events a trace analysis needs, and the sink that fills them.

Kept events are parsed to dicts one at a time and reduced at once to a few typed values;
rows are buffered as tuples and transposed into ``array`` columns in bulk (C speed), so a
file with millions of kernels costs tens of bytes per kernel, not a dict each (41 per GPU
event: name, thread and dtype ids are 32-bit).
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.core.errors import InputError
from collectors.trace import taxonomy

# Event categories we keep; everything else is dropped unparsed. Old traces used the
# capitalised names (Kernel, Runtime, Operator, Memcpy, Memset).
_GPU_KIND = {b"kernel": 0, b"Kernel": 0, b"gpu_memcpy": 1, b"Memcpy": 1, b"gpu_memset": 2,
             b"Memset": 2}  # fmt: skip
RUNTIME = {b"cuda_runtime", b"cuda_driver", b"Runtime"}
CPU_OP = {b"cpu_op", b"Operator"}
_ANNOTATION = {b"user_annotation", b"gpu_user_annotation"}
KEEP = set(_GPU_KIND) | RUNTIME | CPU_OP | _ANNOTATION


class NotATrace(InputError):
    """Valid JSON that is not a trace (a directory walk skips such files)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.reason = reason


@dataclass
class RawTrace:
    """What one file holds that the analysis needs, in compact columns."""

    path: Path
    size_bytes: int = 0
    digest: str = ""
    partial: bool = False
    partial_reason: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # top-level keys except traceEvents
    events_total: int = 0
    events_kept: int = 0
    names: list[str] = field(default_factory=list)  # interned names; columns hold ids
    tids: list[Any] = field(default_factory=list)  # CPU thread ids; c_tid holds indices
    # GPU activity: kernels, memcpy, memset
    g_kind: array = field(default_factory=lambda: array("b"))
    g_ts: array = field(default_factory=lambda: array("d"))
    g_dur: array = field(default_factory=lambda: array("d"))
    g_stream: array = field(default_factory=lambda: array("q"))
    g_name: array = field(default_factory=lambda: array("i"))
    g_corr: array = field(default_factory=lambda: array("q"))
    g_coll: array = field(default_factory=lambda: array("i"))  # "Collective name" id or -1
    g_dtype: array = field(default_factory=lambda: array("i"))  # args dtype id or -1
    # runtime calls (launches): correlation -> CPU time
    r_corr: array = field(default_factory=lambda: array("q"))
    r_ts: array = field(default_factory=lambda: array("d"))
    r_graph: array = field(default_factory=lambda: array("b"))  # 1: cudaGraphLaunch/hipGraph..
    # CPU ops
    c_ts: array = field(default_factory=lambda: array("d"))
    c_dur: array = field(default_factory=lambda: array("d"))
    c_tid: array = field(default_factory=lambda: array("i"))
    c_name: array = field(default_factory=lambda: array("i"))
    c_dtype: array = field(default_factory=lambda: array("i"))  # comm ops' dtype label id or -1
    # annotations (few): (name, ts, dur, tid)
    cpu_annotations: list[tuple[str, float, float, Any]] = field(default_factory=list)
    gpu_annotations: list[tuple[str, float, float]] = field(default_factory=list)
    # vLLM 0.10-0.11 have no step annotation: the Python frames of ``execute_model``
    # (with_stack=True, vLLM's default) mark the steps; (name, ts, dur, tid)
    exec_frames: list[tuple[str, float, float, Any]] = field(default_factory=list)
    # the vocab-parallel embedding's Python frames (taxonomy.EMBEDDING_FRAME), same shape
    module_frames: list[tuple[str, float, float, Any]] = field(default_factory=list)
    # gloo:/nccl: annotations' dtype (ts, name, label name id): a top-level c10d op whose own
    # "Input type" is ['TensorList', ...] takes the dtype of the backend's annotation
    comm_annotation_dtypes: list[tuple[float, str, int]] = field(default_factory=list)
    # Nsight Systems exports (readers/nsys.py): a kernel's shortName by its demangled name
    # (the one classified and stored), and the capture ranges (start, stop) us, NaN where
    # open: the steps' last resort instead of idle gaps
    short_names: dict[str, str] = field(default_factory=dict)
    capture_ranges: list[tuple[float, float]] = field(default_factory=list)

    @property
    def dist(self) -> dict[str, Any]:
        """The header's ``distributedInfo`` (rank, world_size, backend...); {} without one."""
        dist = self.meta.get("distributedInfo")
        return dist if isinstance(dist, dict) else {}


# RawTrace's columns per kind of row, in the order Sink buffers a row's values
GPU_COLUMNS = ("g_kind", "g_ts", "g_dur", "g_stream", "g_name", "g_corr", "g_coll", "g_dtype")
CPU_COLUMNS = ("c_ts", "c_dur", "c_tid", "c_name", "c_dtype")
RUNTIME_COLUMNS = ("r_corr", "r_ts", "r_graph")
# RawTrace's list fields, in the order a shared parse (split) records and merges them
LIST_FIELDS = ("exec_frames", "module_frames", "cpu_annotations", "gpu_annotations",
               "comm_annotation_dtypes")  # fmt: skip


class Sink:
    """Turns kept events into columns of a RawTrace (rows are buffered, then transposed)."""

    FLUSH = 1 << 16

    def __init__(self, raw: RawTrace) -> None:
        self.raw = raw
        self.name_ids: dict[str, int] = {}
        self.tid_ids: dict[Any, int] = {}
        self.gpu_rows: list[tuple] = []
        self.cpu_rows: list[tuple] = []
        self.rt_rows: list[tuple] = []
        self.locate = lambda offset: offset  # event number at a byte offset (for errors)
        self.comm_ops: dict[int, bool] = {}  # name id -> is a communication op (has a dtype)

    def name_id(self, name: str) -> int:
        return intern(self.name_ids, self.raw.names, name)

    def bad(self, offset: int, cat: bytes, what: str) -> InputError:
        index = self.locate(offset)
        return InputError(f"{self.raw.path}: event #{index} ({cat.decode()}) {what}")

    def add(self, ev: dict[str, Any], cat: bytes, offset: int) -> None:
        get = ev.get
        ph = get("ph")
        if ph is not None and ph != "X":
            return  # begin/end, instant and counter events carry no duration
        name, ts, dur = get("name"), get("ts"), get("dur")
        try:  # comparisons raise TypeError for a missing (None) or non-numeric value
            ok = dur >= 0 and ts > -1e300 and name.__class__ is str
        except TypeError:
            ok = False
        if not ok:
            self._invalid(name, ts, dur, cat, offset)
        self.raw.events_kept += 1
        args = get("args") or {}
        kind = _GPU_KIND.get(cat)
        ids = self.name_ids
        if kind is not None:
            nid = ids.get(name)
            if nid is None:
                nid = self.name_id(name)
            stream = args.get("stream", get("tid"))
            coll, dtype = args.get("Collective name"), args.get("dtype")
            self.gpu_rows.append((
                kind, ts, dur,
                stream if stream.__class__ is int else _digits(stream),
                nid,
                args.get("correlation", -1),
                -1 if coll is None else self.name_id(str(coll)),
                -1 if dtype is None else self.name_id(str(dtype)),
            ))  # fmt: skip
            if len(self.gpu_rows) >= self.FLUSH:
                self.flush()
        elif cat in CPU_OP:
            nid = ids.get(name)
            if nid is None:
                nid = self.name_id(name)
            tid = get("tid")
            t = self.tid_ids.get(tid)
            if t is None:
                t = intern(self.tid_ids, self.raw.tids, tid)
            comm = self.comm_ops.get(nid)
            if comm is None:
                comm = self.comm_ops[nid] = taxonomy.cpu_op_category(name) in taxonomy.COMM
            label = taxonomy.input_dtype(args) if comm else None
            self.cpu_rows.append((ts, dur, t, nid, -1 if label is None else self.name_id(label)))
            if len(self.cpu_rows) >= self.FLUSH:
                self.flush()
        elif cat in RUNTIME:
            corr = args.get("correlation")
            if corr.__class__ is int:
                self.rt_rows.append((corr, ts, 1 if "GraphLaunch" in name else 0))
                if len(self.rt_rows) >= self.FLUSH:
                    self.flush()
        elif cat == b"python_function":  # execute_model or embedding frames (scanner._EXEC)
            frames = self.raw.exec_frames if name.endswith(": execute_model") else (
                self.raw.module_frames)  # fmt: skip
            frames.append((name, float(ts), float(dur), get("tid")))
        elif cat == b"user_annotation":
            self.raw.cpu_annotations.append((name, float(ts), float(dur), get("tid")))
            if name.startswith(("gloo:", "nccl:")) and (label := taxonomy.input_dtype(args)):
                self.raw.comm_annotation_dtypes.append((float(ts), name, self.name_id(label)))
        else:  # gpu_user_annotation
            self.raw.gpu_annotations.append((name, float(ts), float(dur)))

    def _invalid(self, name: Any, ts: Any, dur: Any, cat: bytes, offset: int) -> None:
        if name.__class__ is not str:
            raise self.bad(offset, cat, "lacks a 'name'")
        for key, value in (("ts", ts), ("dur", dur)):
            if value.__class__ not in (int, float):
                raise self.bad(offset, cat, f"{name[:80]!r} lacks a numeric '{key}'")
            if value != value:  # NaN
                raise self.bad(offset, cat, f"{name[:80]!r} has '{key}' NaN, not a number")
        raise self.bad(offset, cat, f"{name[:80]!r} has a negative duration {dur}")

    def flush(self) -> None:
        """Move buffered rows into the typed columns (C-speed transpose)."""
        for rows, keys in ((self.gpu_rows, GPU_COLUMNS), (self.cpu_rows, CPU_COLUMNS),
                           (self.rt_rows, RUNTIME_COLUMNS)):  # fmt: skip
            if rows:
                for key, col in zip(keys, zip(*rows, strict=False), strict=True):
                    arr = getattr(self.raw, key)
                    arr.extend(col if arr.typecode == "d" else _ints(col, arr.typecode))
                rows.clear()


def intern(ids: dict[Any, int], values: list[Any], value: Any) -> int:
    """``value``'s index in ``values``, appended (and indexed in ``ids``) when new."""
    i = ids.get(value)
    if i is None:
        i = ids[value] = len(values)
        values.append(value)
    return i


def _ints(col: tuple, typecode: str) -> array:
    """Integer column; args such as correlation may be missing (-1) or not integers."""
    try:
        return array(typecode, col)
    except (TypeError, OverflowError):
        return array(typecode, (v if v.__class__ is int else -1 for v in col))


def _digits(value: Any) -> int:
    m = re.search(r"\d+", str(value))
    return int(m.group()) if m else -1


def implausible(raw: RawTrace) -> str | None:
    """One line naming the first event no machine could have recorded (store/bounds.py), or
    None: a time that is not finite, negative or past 2100; a GPU event of over an hour, or
    longer than the rest of its trace put together; a base time past 2100."""
    import numpy as np

    from store import bounds

    base = raw.meta.get("baseTimeNanoseconds")
    if base is not None and (why := bounds.BASE_TIME_NS.problem(base)):
        return f"{raw.path}: baseTimeNanoseconds {why}"
    spans = {"GPU event": (raw.g_ts, raw.g_dur, raw.g_name), "CPU op": (raw.c_ts, raw.c_dur,
             raw.c_name), "runtime call": (raw.r_ts, None, None)}  # fmt: skip
    for what, (ts, dur, names) in spans.items():
        for key, values, bound in (("ts", ts, bounds.TIMESTAMP_US), ("dur", dur, bounds.KERNEL_US)):
            if values is None or not len(values):
                continue
            col = np.frombuffer(values, dtype=np.float64)
            bad = ~((col >= bound.low) & (col <= bound.high))  # NaN compares False
            if bad.any():
                i = int(np.argmax(bad))
                name = raw.names[names[i]][:80] if names is not None else f"#{i}"
                return f"{raw.path}: {what} {name!r} {key} {bound.problem(float(col[i]))}"
    for name, ts, dur, *_ in (*raw.cpu_annotations, *raw.gpu_annotations, *raw.exec_frames,
                              *raw.module_frames):  # fmt: skip
        for key, value, bound in (("ts", ts, bounds.TIMESTAMP_US), ("dur", dur, bounds.KERNEL_US)):
            if why := bound.problem(value):
                return f"{raw.path}: annotation {str(name)[:80]!r} {key} {why}"
    return _longer_than_the_rest(raw)


def _longer_than_the_rest(raw: RawTrace) -> str | None:
    """The longest GPU event against the span of every other event of the rank."""
    import numpy as np

    def f64(a: array) -> np.ndarray:
        return np.frombuffer(a, dtype=np.float64)

    if len(raw.g_dur) < 2:
        return None
    ts, dur = f64(raw.g_ts), f64(raw.g_dur)
    i = int(np.argmax(dur))
    parts = [(ts[:i], ts[:i] + dur[:i]), (ts[i + 1 :], ts[i + 1 :] + dur[i + 1 :])]
    if len(raw.c_ts):
        parts.append((f64(raw.c_ts), f64(raw.c_ts) + f64(raw.c_dur)))
    if len(raw.r_ts):
        parts.append((f64(raw.r_ts), f64(raw.r_ts)))
    parts = [(a, b) for a, b in parts if len(a)]
    rest = float(max(b.max() for _, b in parts) - min(a.min() for a, _ in parts))
    if dur[i] > rest:
        return (f"{raw.path}: GPU event {raw.names[raw.g_name[i]][:80]!r} lasts {dur[i]:g} us, "
                f"longer than the rest of its trace ({rest:g} us): no kernel outlasts the "
                "profile that recorded it")  # fmt: skip
    return None
