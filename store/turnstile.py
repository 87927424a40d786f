"""A turnstile in front of an embedded store's file lock, so no process waits forever.

DuckDB's own lock is all-or-nothing and has no queue: a reader that polls it while a
writer commits in a loop (``collectors flush`` of a long backlog, the scale generator)
can lose every race and give up, though the writer leaves gaps between commits. So every
Stepscope process that opens the file first takes an exclusive ``flock`` on a sidecar
file, ``<store>.turn``, and keeps it only until its own open succeeds. A process that
holds the turn is next: the others wait at the turnstile instead of racing it, and
whoever holds the file now (a commit, a page's query) is short-lived by design.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# How often a waiting process looks at the turnstile: the turn is held only while one
# process opens the file (milliseconds), so a short poll loses little and needs no thread.
POLL_S = 0.005


def turn_path(store_file: Path) -> Path:
    return store_file.with_name(store_file.name + ".turn")


def _open_turn_file(path: Path) -> int | None:
    """A descriptor on the sidecar, or None where it cannot exist (read-only folder)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except FileNotFoundError:
        return None  # no folder yet (or a dangling link): nothing to queue on
    except OSError:
        try:  # a store shared read-only: an existing sidecar still queues its readers
            return os.open(path, os.O_RDONLY)
        except OSError:
            return None


@contextmanager
def take_turn(store_file: Path, deadline: float) -> Iterator[bool]:
    """Hold the store's turn for the block; yields False when it could not be had in time.

    A caller that gets False goes on without the turn (and races the file lock as
    before), so a stale or unusable sidecar can slow a process down but never stop it.
    """
    fd = _open_turn_file(turn_path(store_file))
    if fd is None:
        yield False
        return
    try:
        held = False
        while not held:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
            except BlockingIOError:
                if time.monotonic() + POLL_S > deadline:
                    break
                time.sleep(POLL_S)
        yield held
    finally:
        os.close(fd)  # closing the descriptor releases the flock
