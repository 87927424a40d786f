"""The host-wide measurement lock: two GPU measurements never disturb each other.

An ``flock`` on one file per host (``$STEPSCOPE_LOCK_DIR`` or ``/tmp/stepscope-locks``);
the kernel drops it when the holder dies, so a killed collector never leaves it stuck.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from store import settings


def lock_dir() -> Path:
    return Path(os.environ.get(settings.LOCK_DIR.name) or "/tmp/stepscope-locks")


class LockHeld(Exception):
    """Another measurement holds the lock; the message names it."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
        return f"{info.get('verb', '?')} (pid {info.get('pid', '?')}, since {info.get('since', '?')})"
    except (OSError, ValueError):
        return "another process"


@contextmanager
def measurement_lock(verb: str, wait: bool, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the lock for the measurement; raise LockHeld when busy and not waiting."""
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "measure.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait or (deadline is not None and time.monotonic() > deadline):
                    raise LockHeld(f"another measurement is running: {_holder(path)}") from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.pwrite(fd, json.dumps({"verb": verb, "pid": os.getpid(), "since": since}).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock
