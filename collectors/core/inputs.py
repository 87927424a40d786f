"""The one way a collector opens a file it was given: regular files only, within limits.

Every import verb reads its inputs through here, so a FIFO never blocks it, a folder or a
device where a file belongs is named as such, a file over its size limit is refused before a
byte is read, JSON nested past the parser's depth says so, and the same file named twice is
read once. Each refusal is one ``InputError`` line naming the file and the limit.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from collectors.core.errors import InputError

MiB = 1 << 20
GiB = 1 << 30

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))  # fmt: skip


class TooDeep(InputError):
    """JSON nested past the parser's limit (no other reading of the file will do better)."""


def kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def size_text(n: float) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} bytes"


def check_file(path: Path, what: str = "a file", folders_ok: bool = False) -> os.stat_result:
    """The file's stat when it is a regular file; else one line saying what it is
    (``folders_ok``: the verb takes folders too, so a missing path is "no such file or
    folder")."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file{' or folder' if folders_ok else ''}") from None
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, a NUL byte in the name
        raise InputError(f"{path}: cannot read ({_why(exc)})") from None
    other = kind(st.st_mode)
    if other:
        raise InputError(f"{path}: {other}, not {what}")
    return st


@contextmanager
def open_input(path: Path, limit: int | None = None, what: str = "a file") -> Iterator[IO[bytes]]:
    """``path`` opened for reading, when it is a regular file of at most ``limit`` bytes.

    Opened without blocking and checked on the open descriptor, so a FIFO (whose open would
    wait for a writer) or a file swapped after a check is refused, never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder, not {what}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read ({_why(exc)})") from None
    try:
        st = os.fstat(fd)
        other = kind(st.st_mode)
        if other:
            raise InputError(f"{path}: {other}, not {what}")
        if limit is not None and st.st_size > limit:
            raise InputError(f"{path}: {size_text(st.st_size)} is over the {size_text(limit)} "
                             f"limit for {what}")  # fmt: skip
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        try:
            yield fh
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({_why(exc)})") from None


def read_bytes(path: Path, limit: int, what: str = "a file") -> bytes:
    """The whole file (at most ``limit`` bytes; a file growing past it is refused too)."""
    with open_input(path, limit, what) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path}: over the {size_text(limit)} limit for {what}")
    return data


def read_text(path: Path, limit: int, what: str = "a file") -> str:
    """The file as UTF-8 text; bytes that are not UTF-8 become U+FFFD (logs mix encodings)."""
    return read_bytes(path, limit, what).decode("utf-8", errors="replace")


def lines(fh: IO[bytes], path: Path, line_limit: int) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line) of an open file, one at a time: a file of any length in
    bounded memory; a line over ``line_limit`` bytes is refused."""
    for number, line in enumerate(iter(lambda: fh.readline(line_limit + 1), b""), 1):
        if len(line) > line_limit and not line.endswith(b"\n"):
            raise InputError(f"{path}: line {number} is over the {size_text(line_limit)} "
                             "limit for one line")  # fmt: skip
        yield number, line


def parse_json(text: str | bytes, path: Path | str, where: str = "") -> Any:
    """``json.loads`` (bare NaN and Infinity included, as Python's json.dumps writes them);
    one line naming ``path`` (and ``where``: a line, a record) on any failure."""
    at = f"{path}{where}"
    try:
        return json.loads(text)
    except RecursionError:
        # the C parser recurses once per level, up to the interpreter's recursion limit
        raise TooDeep(f"{at}: JSON nested deeper than the parser's limit (about "
                         f"{sys.getrecursionlimit()} levels)") from None  # fmt: skip
    except json.JSONDecodeError as exc:
        raise InputError(f"{at}: not JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno})") from None  # fmt: skip
    except (ValueError, TypeError) as exc:  # bytes that are not UTF-8, numbers too long
        raise InputError(f"{at}: not JSON ({_why(exc)})") from None


def unique(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without a file named twice (the same file under two names too), in order."""
    seen: set[tuple[int, int]] = set()
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            key = (st.st_dev, st.st_ino)
        except (OSError, ValueError):
            out.append(p)  # the reader says what is wrong with it
            continue
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
