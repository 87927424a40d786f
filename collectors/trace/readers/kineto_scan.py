"""One pass over a Kineto (PyTorch profiler) chrome-trace JSON file, plain or gzip.

The file is never parsed as a whole, and most of it is never parsed at all. In each
decompressed chunk a regex finds the ``"cat": "<kept category>"`` of the events we need
(kernels, memcpy/memset, runtime launches, CPU ops, annotations); each such event is
cut out between the ``{`` before its category and the next ``}, {`` separator and parsed
alone with orjson. Everything else (python_function frames, flows, instant events,
metadata: usually most of a file) is skipped at regex speed without becoming a Python
object. A separator can also occur inside a string or a nested object: such a cut fails
to parse and is widened to the next separator, so a false split costs a retry, never a
wrong event. The keys around ``traceEvents`` (``distributedInfo``, ``deviceProperties``,
``baseTimeNanoseconds``) may come before or after the events. Gzip is inflated in a
background thread (see ``source``), overlapping the parse.

A file that ends inside ``traceEvents`` (a crashed run's ``.tmp``) keeps its complete
events and is marked partial. Several processes can share one file (``split``): each
scans it with a ``Part`` that says which chunks are its own.
"""

from __future__ import annotations

import gc
import re
from collections import deque
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from json import loads as _std_loads
from pathlib import Path
from typing import Any

from collectors.core.errors import InputError
from collectors.trace.columns import CPU_OP, KEEP, LIST_FIELDS, RUNTIME, NotATrace, RawTrace, Sink
from collectors.trace.readers.source import chunks
from collectors.trace.taxonomy import EMBEDDING_FRAME, EMBEDDING_OP, ENCLOSING_OP_PATTERNS
from store.trace_vocab import CAST_OPS

try:
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is pinned; stdlib json is ~3x slower
    from json import loads as _loads

_SEP = re.compile(rb"\}\s*,\s*\{")
# Python frames are skipped, except vLLM's `...gpu_model_runner.py(N): execute_model`
# (steps of vLLM 0.10-0.11, which have no step annotation) and the vocab-parallel
# embedding's (taxonomy.EMBEDDING_FRAME: the step anatomy's `embedding` AllReduce)
_EXEC = (rb'|(python_function)"\s*,\s*"name"\s*:\s*"(?:[^"]{0,400}\): execute_model|'
         + EMBEDDING_FRAME.encode() + rb')"')  # fmt: skip
_KEPT = re.compile(rb'"cat"\s*:\s*"(?:(' + b"|".join(sorted(KEEP)) + rb')"' + _EXEC + rb")")
# GPU traces need few CPU ops: casts (is a direct copy a cast?), c10d collectives (which
# collective launched a SendRecv?), the MoE/attention ops whose kernels take their
# category (taxonomy.ENCLOSING_OP_PATTERNS) and the embedding lookup (step anatomy). Their
# header lists devices, so the other CPU ops are skipped unparsed; a trace that then shows
# no GPU activity is read again with all.
_ENCLOSING = "|".join(f"(?:{p})" for _cat, p in ENCLOSING_OP_PATTERNS).encode()
_NAMED_OPS = "|".join(re.escape(op) for op in (*CAST_OPS, EMBEDDING_OP)).encode()
# Runtime calls matter only as launches (their correlation id is a GPU event's): keep
# `cudaLaunchKernel*`, `cuLaunchKernel*`, `*GraphLaunch`, `*Memcpy*`, `*Memset*` (hip too);
# cudaEventRecord, cudaStreamIsCapturing, cudaFuncSetAttribute... (up to 60% of the runtime
# calls of real traces) are skipped unparsed. A trace whose runtime calls are spelled in
# another key order keeps none this way and is read again with all of them.
_LAUNCHES = (rb'|(cuda_runtime|cuda_driver|Runtime)"\s*,\s*"name"\s*:\s*"[^"]{0,200}'
             rb"(?:Launch|Memcpy|Memset|memcpy|memset)")  # fmt: skip
_KEPT_GPU = re.compile(
    rb'"cat"\s*:\s*"(?:('
    + b"|".join(sorted(KEEP - CPU_OP - RUNTIME))
    + rb')"'
    + _LAUNCHES
    + rb'|(cpu_op|Operator)"\s*,'
    rb'\s*"name"\s*:\s*"(?:(?:' + _NAMED_OPS + rb')"|c10d::|'
    rb"nccl:|record_param_comms|" + _ENCLOSING + rb")" + _EXEC + rb")"
)
_KEPT_GPU_ALL_RUNTIME = re.compile(_KEPT_GPU.pattern.replace(
    rb'(' + b"|".join(sorted(KEEP - CPU_OP - RUNTIME)) + rb')"' + _LAUNCHES,
    rb'(' + b"|".join(sorted(KEEP - CPU_OP)) + rb')"|(?!)()'))  # fmt: skip
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
# "}" "]" then another top-level key or the closing brace
_ARRAY_END = re.compile(rb'\}\s*\](?=\s*(?:,\s*"[^"]*"\s*:|\}))')
_MAX_HEADER = 256 << 20
_MAX_EVENT = 64 << 20  # one event larger than this means broken JSON


@dataclass
class Part:
    """Which chunks this process parses, and how long its columns were after each."""

    mine: int  # 0: the caller (also the final chunk), 1..: the workers
    parts: int = 2  # processes sharing the file
    chunk: int = 0
    # (chunk, gpu, cpu, runtime rows, *list lengths, names, tids) after each own chunk
    marks: list[tuple[int, ...]] = field(default_factory=list)

    def take(self, final: bool) -> bool:
        i = self.chunk
        self.chunk += 1
        return self.mine == 0 if final else i % self.parts == self.mine

    def mark(self, sink: Sink) -> None:
        sink.flush()
        r = sink.raw
        self.marks.append((self.chunk - 1, len(r.g_ts), len(r.c_ts), len(r.r_ts),
                           *(len(getattr(r, k)) for k in LIST_FIELDS), len(r.names),
                           len(r.tids)))  # fmt: skip


def scan(path: Path, all_cpu_ops: bool | None, all_runtime: bool, part: Part | None = None,
         block: int = 0) -> tuple[RawTrace, bool | None]:  # fmt: skip
    """One pass over the file: (columns, the all_cpu_ops used). ``part``: set when several
    processes share the parse (each takes its own chunks)."""
    raw = RawTrace(path=path)
    sink = Sink(raw)
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived dicts: the cyclic GC would rescan our buffers
    try:
        scanner = _Scanner(raw, sink, all_cpu_ops, all_runtime, part)
        scanner.run(chunks(path, raw, block))
        sink.flush()
    finally:
        if enabled:
            gc.enable()
    return raw, scanner.all_cpu_ops


class _Scanner:
    """Header -> events -> trailer over decompressed chunks."""

    def __init__(self, raw: RawTrace, sink: Sink, all_cpu_ops: bool | None, all_runtime: bool,
                 part: Part | None) -> None:  # fmt: skip
        self.all_runtime = all_runtime
        self.raw, self.sink = raw, sink
        self.trailer: list[bytes] | None = None  # set once the events array has closed
        self.all_cpu_ops = all_cpu_ops
        self.part = part  # set: this process parses only its share of chunks
        self.separator = b""  # learnt from the first events (see _learn_separator)

    def run(self, chunks: Iterator[bytes]) -> None:
        buf = b""
        started = False
        for chunk in chunks:
            if self.trailer is not None:
                self.trailer.append(chunk)
                continue
            buf = buf + chunk if buf else chunk
            if not started:
                m = _EVENTS_KEY.search(buf)
                if m is None:
                    if len(buf) > _MAX_HEADER:
                        raise InputError(f"{self.raw.path}: no traceEvents array found")
                    continue
                self._header(buf[: m.start()])
                buf = buf[m.end() :].lstrip()
                started = True
                if buf[:1] == b"]":  # empty array
                    self.trailer = [buf[1:]]
                    continue
            buf = self._events(buf, final=False)
        if not started:
            self._not_a_trace(buf)
        if self.trailer is None:
            self._events(buf, final=True)
        if self.trailer is not None:
            self._parse_trailer(b"".join(self.trailer))

    def _events(self, buf: bytes, final: bool) -> bytes:
        """Take every complete event of ``buf``; return the incomplete tail."""
        last = buf.rfind(b'"ph"')
        end = _ARRAY_END.search(buf, max(last, 0))
        if end is not None:
            self._region(buf, end.start() + 1, final=True)
            rest = buf[end.end() :].lstrip()
            self.trailer = [rest[1:] if rest[:1] == b"," else rest]
            return b""
        if final:
            self._region(buf, len(buf), final=True)
            self._truncated()
            return b""
        cut = self._last_separator(buf, last)
        if cut is None:
            if len(buf) > _MAX_EVENT:
                raise InputError(f"{self.raw.path}: invalid JSON in traceEvents")
            return buf
        self._region(buf, cut + 1, final=False)
        return buf[cut + 1 :].lstrip().removeprefix(b",").lstrip()

    @staticmethod
    def _last_separator(buf: bytes, before: int) -> int | None:
        """Offset of the "}" of the last separator before ``before``."""
        lo = before
        while lo > 0:
            lo = max(0, lo - (1 << 16))
            found = _last(_SEP.finditer(buf, lo, before))
            if found is not None:
                return found.start()
        return None

    def _region(self, buf: bytes, stop: int, final: bool) -> None:
        """Parse the kept events in buf[:stop] (complete events, except at a truncation)."""
        raw, add, loads = self.raw, self.sink.add, _loads
        part = self.part
        if part is not None and not part.take(final):
            return  # the other process's chunk (it counts its events too)
        base = raw.events_total
        raw.events_total += buf.count(b'"ph"', 0, stop)
        self.sink.locate = lambda offset: base + buf.count(b'"ph"', 0, offset)
        pos = 0
        rfind, find, sep = buf.rfind, buf.find, _SEP.search
        lit = self.separator or self._learn_separator(buf, stop)
        for m in self._matches(buf, stop):
            at = m.start()
            if at < pos:
                continue  # a "cat" inside the previous event's args
            cat = m.group(1) or m.group(2) or m.group(3) or m.group(4)
            start = rfind(b"{", max(pos, at - 256), at)
            # The file's own separator as a literal is ~5x faster to find than the regex;
            # where it is not the real end (mixed spacing), the regex cut is tried next.
            cut = find(lit, m.end(), stop) if lit else -1
            if cut < 0:
                nxt = sep(buf, m.end(), stop)
                cut = nxt.start() if nxt else stop - 1
            end = cut + 1
            try:
                ev = loads(buf[start:end])
            except ValueError:
                ev, start, end = self._retry_cut(buf, pos, at, m.end(), end, stop, final)
                if ev is None:
                    continue
            pos = end
            if ev.__class__ is dict:
                add(ev, cat, start)
        if part is not None:
            part.mark(self.sink)

    def _learn_separator(self, buf: bytes, stop: int) -> bytes:
        """The bytes between two events as this file writes them (Kineto: ``},\n  {``)."""
        found = _SEP.search(buf, 0, stop)
        if found is not None:
            self.separator = found.group()
        return self.separator

    def _retry_cut(self, buf: bytes, pos: int, at: int, after: int, end: int, stop: int,
                   final: bool):  # fmt: skip
        """The literal cut did not parse: try it with the standard library's parser (a bare
        NaN or Infinity, which orjson refuses: the event is kept, and the sink says what is
        wrong with its value), then the regex cut, then widen (``_slow``)."""
        start = buf.rfind(b"{", max(pos, at - 256), at)
        with suppress(ValueError, RecursionError):
            return _std_loads(buf[start:end]), start, end
        nxt = _SEP.search(buf, after, stop)
        regex_end = nxt.start() + 1 if nxt else stop
        if regex_end != end:
            start = buf.rfind(b"{", max(pos, at - 256), at)
            try:
                return _loads(buf[start:regex_end]), start, regex_end
            except ValueError:
                pass
        return self._slow(buf, pos, at, regex_end, stop, final)

    def _matches(self, buf: bytes, stop: int) -> Iterator[re.Match]:
        """The kept events' "cat" matches in order (all CPU ops, or only the wanted ones)."""
        if self.all_cpu_ops:
            return _KEPT.finditer(buf, 0, stop)
        return (_KEPT_GPU_ALL_RUNTIME if self.all_runtime else _KEPT_GPU).finditer(buf, 0, stop)

    def _slow(self, buf: bytes, pos: int, cat: int, end: int, stop: int, final: bool):
        """A cut that did not parse: a separator inside a string, a key with braces before
        "cat", or the cut-off last event of a truncated file."""
        sep = _last(_SEP.finditer(buf, pos, cat))
        # Only the last event of the region may be cut off; any other that does not parse
        # is broken JSON, said, never dropped with what follows it.
        last = _SEP.search(buf, cat, stop) is None
        starts = {buf.rfind(b"{", pos, cat), sep.end() - 1 if sep else buf.find(b"{", pos, cat)}
        for start in sorted(s for s in starts if s >= 0):
            stretch = end
            while True:
                try:
                    return _loads(buf[start:stretch]), start, stretch
                except ValueError:
                    pass
                if stretch >= stop or stretch - start > _MAX_EVENT:
                    break
                nxt = _SEP.search(buf, stretch, stop)
                stretch = nxt.start() + 1 if nxt else stop
            if final and last:  # the last event of a truncated file may end with its ","
                try:
                    return _loads(buf[start:stop].rstrip().rstrip(b",")), start, stop
                except ValueError:
                    pass
        if final and last:  # the cut-off last event of a truncated file: not kept
            return None, pos, stop
        index = self.sink.locate(cat)
        raise InputError(f"{self.raw.path}: invalid JSON in traceEvents near event #{index}")

    def _truncated(self) -> None:
        raw = self.raw
        why = truncation_note(raw.events_kept)
        raw.partial_reason = f"{raw.partial_reason}; {why}" if raw.partial_reason else why
        raw.partial = True

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
        if self.all_cpu_ops is None:  # a header that lists GPUs announces a GPU trace
            props = meta.get("deviceProperties")
            self.all_cpu_ops = not (isinstance(props, list) and len(props) > 0)

    def _parse_trailer(self, tail: bytes) -> None:
        text = tail.strip().removeprefix(b",").lstrip()
        if not text:
            self._partial("the trace is not closed")
        elif text != b"}":
            try:
                self.raw.meta.update(_loads(b"{" + text))  # "{" + text parses as an object
            except ValueError:
                self._partial("the trace's last keys are cut")

    def _partial(self, why: str) -> None:
        """Mark the trace partial; a reason found earlier (a truncated gzip stream) stays."""
        self.raw.partial = True
        self.raw.partial_reason = self.raw.partial_reason or why

    def _not_a_trace(self, buf: bytes) -> None:
        path = self.raw.path
        text = buf.strip()
        if not text:
            if self.raw.partial:  # a gzip stream cut before its first inflated byte
                raise InputError(f"{path}: truncated gzip file: its stream ends before any data")
            what = "empty" if self.raw.size_bytes == 0 else "only whitespace"
            raise InputError(f"{path}: the file is {what}")
        try:
            doc: Any = _loads(text)
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


def truncation_note(kept: int) -> str:
    return f"the file ends inside traceEvents; {kept} complete events kept"


def _last(matches: Iterator[re.Match]) -> re.Match | None:
    last = deque(matches, maxlen=1)
    return last[0] if last else None


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120]
