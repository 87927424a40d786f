"""Streaming reader for Kineto (PyTorch profiler) chrome-trace JSON, plain or gzip.

The file is never parsed as a whole. Decompressed chunks are split on the separator
between two events (``}`` ``,`` ``{``); each piece's ``"cat"`` is read with a regex and
pieces we do not need (python_function, flows, instant events, metadata: often >80% of a
file) are dropped without being parsed. Kept pieces are parsed one by one with orjson
and stored in typed arrays. A separator can also occur inside a string or a nested
object: such a piece fails to parse and is joined with the next one, so a false split
costs a retry, never a wrong event. The keys around ``traceEvents`` (``distributedInfo``,
``deviceProperties``, ``baseTimeNanoseconds``) may come before or after the events.

A file that ends inside ``traceEvents`` (a crashed run's ``.tmp``) keeps its complete
events and is marked partial.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.errors import InputError

try:
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is pinned; stdlib json is ~3x slower
    from json import loads as _loads

_SEP = re.compile(rb"\}\s*,\s*\{")
_CAT = re.compile(rb'"cat"\s*:\s*"([^"]*)"')
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_ARRAY_END = re.compile(rb"\}\s*\]\s*[,}]")
_CHUNK = 4 << 20
_GZ_READ = 256 << 10  # compressed bytes per read (~20x that decompressed)
_MAX_MERGE = 256  # pieces one event may span before we call the JSON broken
_MAX_HEADER = 256 << 20

# Event categories we keep; everything else is dropped unparsed. Old traces used the
# capitalised names (Kernel, Runtime, Operator, Memcpy, Memset).
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2
_GPU_KIND = {b"kernel": 0, b"Kernel": 0, b"gpu_memcpy": 1, b"Memcpy": 1, b"gpu_memset": 2,
             b"Memset": 2}  # fmt: skip
_RUNTIME = {b"cuda_runtime", b"cuda_driver", b"Runtime"}
_CPU_OP = {b"cpu_op", b"Operator"}
_ANNOTATION = {b"user_annotation", b"gpu_user_annotation"}
KEEP = set(_GPU_KIND) | _RUNTIME | _CPU_OP | _ANNOTATION


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
    g_name: array = field(default_factory=lambda: array("l"))
    g_corr: array = field(default_factory=lambda: array("q"))
    g_ext: array = field(default_factory=lambda: array("q"))
    g_coll: array = field(default_factory=lambda: array("l"))  # "Collective name" id or -1
    g_dtype: array = field(default_factory=lambda: array("l"))  # args dtype id or -1
    # runtime calls (launches): correlation -> CPU time
    r_corr: array = field(default_factory=lambda: array("q"))
    r_ts: array = field(default_factory=lambda: array("d"))
    # CPU ops
    c_ts: array = field(default_factory=lambda: array("d"))
    c_dur: array = field(default_factory=lambda: array("d"))
    c_tid: array = field(default_factory=lambda: array("l"))
    c_name: array = field(default_factory=lambda: array("l"))
    # annotations (few): (name, ts, dur, tid)
    cpu_annotations: list[tuple[str, float, float, Any]] = field(default_factory=list)
    gpu_annotations: list[tuple[str, float, float]] = field(default_factory=list)


class _Sink:
    """Turns kept events into columns of a RawTrace (rows are buffered, then transposed)."""

    FLUSH = 1 << 16

    def __init__(self, raw: RawTrace) -> None:
        self.raw = raw
        self.name_ids: dict[str, int] = {}
        self.tid_ids: dict[Any, int] = {}
        self.gpu_rows: list[tuple] = []
        self.cpu_rows: list[tuple] = []
        self.rt_rows: list[tuple] = []

    def name_id(self, name: str) -> int:
        i = self.name_ids.get(name)
        if i is None:
            i = self.name_ids[name] = len(self.raw.names)
            self.raw.names.append(name)
        return i

    def bad(self, index: int, cat: bytes, what: str) -> InputError:
        return InputError(f"{self.raw.path}: event #{index} ({cat.decode()}) {what}")

    def add(self, ev: dict[str, Any], cat: bytes, index: int) -> None:
        if ev.get("ph") != "X":
            return
        name, ts, dur = ev.get("name"), ev.get("ts"), ev.get("dur")
        if name.__class__ is not str:
            raise self.bad(index, cat, "lacks a 'name'")
        try:  # one arithmetic check validates both numbers (None/str raise TypeError)
            if dur < 0 or ts + dur != ts + dur:
                raise self.bad(index, cat, f"{name[:80]!r} has a negative duration {dur}")
        except TypeError:
            field_ = "ts" if ts is None or ts.__class__ is str else "dur"
            raise self.bad(index, cat, f"{name[:80]!r} lacks a numeric '{field_}'") from None
        self.raw.events_kept += 1
        args = ev.get("args") or {}
        kind = _GPU_KIND.get(cat)
        if kind is not None:
            stream = args.get("stream", ev.get("tid"))
            coll, dtype = args.get("Collective name"), args.get("dtype")
            self.gpu_rows.append((
                kind, ts, dur,
                stream if stream.__class__ is int else _digits(stream),
                self.name_id(name),
                args.get("correlation", -1),
                args.get("External id", -1),
                -1 if coll is None else self.name_id(str(coll)),
                -1 if dtype is None else self.name_id(str(dtype)),
            ))  # fmt: skip
            if len(self.gpu_rows) >= self.FLUSH:
                self.flush()
        elif cat in _CPU_OP:
            tid = ev.get("tid")
            t = self.tid_ids.get(tid)
            if t is None:
                t = self.tid_ids[tid] = len(self.tid_ids)
                self.raw.tids.append(tid)
            self.cpu_rows.append((ts, dur, t, self.name_id(name)))
            if len(self.cpu_rows) >= self.FLUSH:
                self.flush()
        elif cat in _RUNTIME:
            corr = args.get("correlation")
            if corr.__class__ is int:
                self.rt_rows.append((corr, ts))
                if len(self.rt_rows) >= self.FLUSH:
                    self.flush()
        elif cat == b"user_annotation":
            self.raw.cpu_annotations.append((name, float(ts), float(dur), ev.get("tid")))
        else:  # gpu_user_annotation
            self.raw.gpu_annotations.append((name, float(ts), float(dur)))

    def flush(self) -> None:
        """Move buffered rows into the typed columns (C-speed transpose)."""
        raw = self.raw
        if self.gpu_rows:
            cols = list(zip(*self.gpu_rows, strict=False))
            for arr, col in zip((raw.g_kind, raw.g_ts, raw.g_dur, raw.g_stream, raw.g_name,
                                 raw.g_corr, raw.g_ext, raw.g_coll, raw.g_dtype), cols, strict=False):  # fmt: skip
                arr.extend(col if arr.typecode == "d" else _ints(col, arr.typecode))
            self.gpu_rows = []
        if self.cpu_rows:
            ts, dur, tid, name = zip(*self.cpu_rows, strict=False)
            raw.c_ts.extend(ts)
            raw.c_dur.extend(dur)
            raw.c_tid.extend(tid)
            raw.c_name.extend(name)
            self.cpu_rows = []
        if self.rt_rows:
            corr, ts = zip(*self.rt_rows, strict=False)
            raw.r_corr.extend(_ints(corr, "q"))
            raw.r_ts.extend(ts)
            self.rt_rows = []


def _ints(col: tuple, typecode: str) -> array:
    """Integer column; args such as correlation may be missing (-1) or not integers."""
    try:
        return array(typecode, col)
    except (TypeError, OverflowError):
        return array(typecode, (v if v.__class__ is int else -1 for v in col))


def _digits(value: Any) -> int:
    m = re.search(r"\d+", str(value))
    return int(m.group()) if m else -1


def _chunks(path: Path, raw: RawTrace) -> Iterator[bytes]:
    """Decompressed chunks (at most _CHUNK bytes each); checksums the file as it is read."""
    crc = 0
    with path.open("rb") as f:
        block = f.read(_CHUNK)
        head_sha = hashlib.sha256(block).hexdigest()
        d = zlib.decompressobj(zlib.MAX_WBITS | 16) if block[:2] == b"\x1f\x8b" else None
        while block:
            crc = zlib.crc32(block, crc)
            raw.size_bytes += len(block)
            if d is None:
                yield block
            else:
                yield from _inflate(path, d, block)
                if d.eof and d.unused_data:  # concatenated gzip members are legal
                    rest = d.unused_data
                    if not b"\x1f\x8b".startswith(rest[:2]):
                        raise InputError(f"{path}: garbage after the gzip stream")
                    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
                    yield from _inflate(path, d, rest)
            block = f.read(_GZ_READ if d is not None else _CHUNK)
        if d is not None and not d.eof:
            raw.partial = True
            raw.partial_reason = "the gzip stream is truncated"
    # sha256 of every byte runs at ~200 MB/s here; size + crc32 + the first chunk's sha256
    # identify a trace file for re-import just as well at >2 GB/s
    raw.digest = hashlib.sha256(f"{raw.size_bytes}:{crc}:{head_sha}".encode()).hexdigest()


def _inflate(path: Path, d: Any, data: bytes) -> Iterator[bytes]:
    try:
        while data:
            out = d.decompress(data, _CHUNK)
            data = d.unconsumed_tail
            if out:
                yield out
    except zlib.error as exc:
        raise InputError(f"{path}: corrupt gzip data ({exc})") from None


def read_trace(path: Path) -> RawTrace:
    """Stream one trace file into a RawTrace; raise InputError on unusable input."""
    raw = RawTrace(path=path)
    sink = _Sink(raw)
    _Scanner(raw, sink).run(_chunks(path, raw))
    sink.flush()
    if raw.size_bytes == 0:
        raise InputError(f"{path}: the file is empty")
    return raw


class _Scanner:
    """Header -> events -> trailer state machine over decompressed chunks."""

    def __init__(self, raw: RawTrace, sink: _Sink) -> None:
        self.raw, self.sink = raw, sink
        self.pending: bytes | None = None
        self.merges = 0
        self.trailer: list[bytes] | None = None  # set once the events array has closed
        self.opened = False  # the first event's "{" has been consumed

    def run(self, chunks) -> None:
        buf = b""
        started = False
        for chunk in chunks:
            if self.trailer is not None:
                self.trailer.append(chunk)
                continue
            buf += chunk
            if not started:
                m = _EVENTS_KEY.search(buf)
                if m is None:
                    if len(buf) > _MAX_HEADER:
                        raise InputError(f"{self.raw.path}: no traceEvents array found")
                    continue
                self._header(buf[: m.start()])
                buf = buf[m.end() :]
                started = True
            buf = self._events(buf, final=False)
        if not started:
            self._not_a_trace(buf)
            return
        if self.trailer is None:
            self._events(buf, final=True)
        if self.trailer is not None:
            self._parse_trailer(b"".join(self.trailer))

    def _not_a_trace(self, buf: bytes) -> None:
        path = self.raw.path
        text = buf.strip()
        if not text:
            if self.raw.size_bytes == 0:
                raise InputError(f"{path}: the file is empty")
            raise InputError(f"{path}: the file holds only whitespace")
        try:
            doc = _loads(text)
        except ValueError as exc:
            if self.raw.partial:
                raise InputError(f"{path}: truncated gzip file with no trace events") from None
            raise InputError(f"{path}: not valid JSON ({_short(exc)})") from None
        if isinstance(doc, dict):
            if "traceEvents" in doc:
                raise InputError(f"{path}: traceEvents is not a list")
            keys = ", ".join(list(doc)[:5]) or "none"
            raise NotATrace(path, f"JSON object without traceEvents (keys: {keys})")
        kind = {list: "array", str: "string", int: "number", float: "number"}.get(
            type(doc), type(doc).__name__
        )
        raise NotATrace(path, f"top level is a JSON {kind}, expected an object with traceEvents")

    def _header(self, head: bytes) -> None:
        text = head.strip()
        if not text.startswith(b"{"):
            raise InputError(f"{self.raw.path}: top level is not a JSON object")
        body = text[1:].rstrip().rstrip(b",")
        try:
            meta = _loads(b"{" + body + b"}")
        except ValueError as exc:
            raise InputError(
                f"{self.raw.path}: invalid JSON before traceEvents ({_short(exc)})"
            ) from None
        self.raw.meta.update(meta)

    def _parse_trailer(self, tail: bytes) -> None:
        text = tail.strip()
        if text.startswith(b","):
            text = text[1:]
        try:
            meta = _loads(b"{" + text) if text.rstrip() != b"}" else {}
        except ValueError:
            self.raw.partial = True
            self.raw.partial_reason = self.raw.partial_reason or "the trace's last keys are cut"
            return
        if isinstance(meta, dict):
            self.raw.meta.update(meta)

    def _events(self, buf: bytes, final: bool) -> bytes:
        """Consume complete pieces of ``buf``; return the unconsumed tail."""
        if not self.opened:
            stripped = buf.lstrip()
            if not stripped:
                if final:
                    self._truncated()
                return b""
            if stripped[:1] == b"]":
                self.trailer = [stripped[1:]]
                return b""
            if stripped[:1] != b"{":
                raise InputError(f"{self.raw.path}: traceEvents holds a non-object")
            buf = stripped[1:]
            self.opened = True
        pieces = _SEP.split(buf)
        tail = b"" if final else pieces.pop()
        cat_search, keep, raw = _CAT.search, KEEP, self.raw
        for i, piece in enumerate(pieces):
            if self.pending is None:  # fast path: drop unneeded events unparsed
                m = cat_search(piece)
                if (m is None or m.group(1) not in keep) and b"]" not in piece:
                    raw.events_total += 1
                    continue
            elif not piece:
                continue
            end = self._piece(piece)
            if end is not None:  # the events array closed inside this piece
                rest = [end, *pieces[i + 1 :]]
                if not final:
                    rest.append(tail)
                self.trailer = [b"}, {".join(rest)]
                return b""
        if final:
            self._truncated()
        return tail

    def _truncated(self) -> None:
        """The file ended inside traceEvents: keep the last event if it is whole."""
        last, self.pending = self.pending, None
        if last is not None:
            m = _CAT.search(last)
            try:
                ev = _loads(b"{" + last)  # a whole last event still has its own "}"
            except ValueError:
                ev = None
            if ev is not None and m is not None and m.group(1) in KEEP:
                self._add(ev, m.group(1))
        raw = self.raw
        why = f"the file ends inside traceEvents; {raw.events_kept} complete events kept"
        raw.partial_reason = f"{raw.partial_reason}; {why}" if raw.partial_reason else why
        raw.partial = True

    def _piece(self, piece: bytes) -> bytes | None:
        """Handle one event piece; return the trailer text if the array ends in it."""
        if self.pending is not None:
            # The true separator is lost; inside a JSON string (the only place where it
            # matters: no raw newline there) it is the demangler's "}, {" in practice.
            piece = self.pending + b"}, {" + piece
            self.pending = None
        m = _CAT.search(piece)
        cat = m.group(1) if m else None
        if cat not in KEEP:
            if b"]" in piece:
                end = _ARRAY_END.search(piece)
                if end is not None:
                    self.raw.events_total += 1
                    return piece[end.start() + 1 :].lstrip()[1:]
            self.raw.events_total += 1
            return None
        try:
            ev = _loads(b"{" + piece + b"}")
        except ValueError:
            end = _ARRAY_END.search(piece)
            if end is not None:
                head = piece[: end.start()]
                try:
                    ev = _loads(b"{" + head + b"}")
                except ValueError:
                    ev = None
                if ev is not None:
                    self._add(ev, cat)
                    return piece[end.start() + 1 :].lstrip()[1:]
            self.merges += 1
            if self.merges > _MAX_MERGE:
                raise InputError(
                    f"{self.raw.path}: invalid JSON in traceEvents near event "
                    f"#{self.raw.events_total}"
                ) from None
            self.pending = piece
            return None
        self.merges = 0
        self._add(ev, cat)
        return None

    def _add(self, ev: Any, cat: bytes) -> None:
        index = self.raw.events_total
        self.raw.events_total += 1
        if isinstance(ev, dict):
            self.sink.add(ev, cat, index)


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120]
