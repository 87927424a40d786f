"""Trace file bytes: plain or gzip (inflated by a background thread), plus a digest.

The inflater releases the GIL, so on two cores the parse of one chunk overlaps the
inflation of the next; a bounded queue keeps at most a few chunks in memory. ISA-L's
igzip (the pinned ``isal`` package) inflates ~4x faster than zlib; without it, zlib.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from collectors.errors import InputError
from collectors.trace.columns import RawTrace

_CHUNK = 8 << 20
_GZ_READ = 512 << 10  # compressed bytes per read (~20x that once inflated)
# igzip is fastest when each call may inflate its whole input: bound a call's output only
# against pathological ratios (a trace inflates 13-20x: ~10 MB per read)
_GZ_OUT = 64 << 20


def _inflater() -> tuple[ModuleType, type[Exception]]:
    try:
        from isal import isal_zlib
    except ImportError:  # pragma: no cover - isal is pinned; zlib is ~4x slower
        return zlib, zlib.error
    return isal_zlib, isal_zlib.error


def chunks(path: Path, raw: RawTrace, block: int = 0) -> Iterator[bytes]:
    """Decompressed chunks; gzip is inflated by a background thread. ``block``: bytes per
    read instead of the defaults (tests use small blocks to get many chunks)."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        yield from _plain(path, raw, block or _CHUNK)
        return
    q: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    worker = threading.Thread(target=_inflate_into, args=(path, raw, q, stop, block or _GZ_READ),
                              daemon=True)  # fmt: skip
    worker.start()
    try:
        while True:
            item = q.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                worker.join(0.05)


def _plain(path: Path, raw: RawTrace, block_size: int) -> Iterator[bytes]:
    crc = 0
    head = _Head(_CHUNK)
    with path.open("rb") as f:
        while block := f.read(block_size):
            head.update(block)
            crc = zlib.crc32(block, crc)
            raw.size_bytes += len(block)
            yield block
    _set_digest(raw, crc, head.hexdigest())


class _Head:
    """sha256 of a file's first ``size`` bytes, whatever the read size (the digest of a
    file must not depend on how it was read)."""

    def __init__(self, size: int) -> None:
        self.left, self.sha, self.seen = size, hashlib.sha256(), False

    def update(self, block: bytes) -> None:
        if self.left > 0:
            part = block[: self.left]
            self.sha.update(part)
            self.left -= len(part)
            self.seen = True

    def hexdigest(self) -> str | None:
        return self.sha.hexdigest() if self.seen else None


def _set_digest(raw: RawTrace, crc: int, head_sha: str | None) -> None:
    # sha256 of every byte runs at ~200 MB/s here; size + crc32 + the first chunk's sha256
    # identify a trace file for re-import just as well at >2 GB/s
    raw.digest = hashlib.sha256(f"{raw.size_bytes}:{crc}:{head_sha}".encode()).hexdigest()


def _inflate_into(
    path: Path, raw: RawTrace, q: queue.Queue, stop: threading.Event, read_size: int
) -> None:
    try:
        crc = 0
        head = _Head(_GZ_READ)
        lib, error = _inflater()
        d = lib.decompressobj(zlib.MAX_WBITS | 16)
        with path.open("rb") as f:
            while (block := f.read(read_size)) and not stop.is_set():
                head.update(block)
                crc = zlib.crc32(block, crc)
                raw.size_bytes += len(block)
                data = block
                while data and not stop.is_set():
                    try:
                        out = d.decompress(data, _GZ_OUT)
                    except error as exc:
                        raise InputError(f"{path}: corrupt gzip data ({exc})") from None
                    data = d.unconsumed_tail
                    if out:
                        q.put(out)
                    if d.eof and d.unused_data:  # concatenated gzip members are legal
                        data = d.unused_data
                        if not b"\x1f\x8b".startswith(data[:2]):
                            raise InputError(f"{path}: garbage after the gzip stream")
                        d = lib.decompressobj(zlib.MAX_WBITS | 16)
        if not d.eof and not stop.is_set():
            raw.partial = True
            raw.partial_reason = "the gzip stream is truncated"
        _set_digest(raw, crc, head.hexdigest())
        q.put(None)
    except BaseException as exc:  # handed to the reading thread
        q.put(exc)
