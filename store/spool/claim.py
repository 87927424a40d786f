"""Who may read, commit or move a spool entry: the one process that holds its claim.

A claim is an exclusive ``flock`` on the entry's folder. A collector claims its entry
before the entry appears under its final name (store/spool/bundle.py ``spool_claimed``) and keeps
the claim until its commit has removed the entry; a flush claims the other entries without
waiting and leaves alone any that another live process holds (it is spooling, committing,
or waiting on a busy store). The kernel drops a claim when its process dies, so the entry
of a collector killed between spool and commit is the next flush's to take.

Only the holder of a claim removes or moves the folder, so an entry found gone once
claimed was committed (or set aside) by its holder: it is never read half-removed, and a
valid entry is never mistaken for a corrupt one.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path


class EntryHeld(Exception):
    """Another live process holds the entry's claim."""


@dataclass
class EntryClaim:
    entry: Path  # follows the folder when its holder renames it (the flock is on the inode)
    fd: int | None

    def present(self) -> bool:
        """The claimed folder is still at ``entry`` (not removed, not replaced by a new
        entry of the same run, which would be another folder with a claim of its own)."""
        if self.fd is None:
            return False
        try:
            now = os.stat(self.entry)
        except FileNotFoundError:
            return False
        held = os.fstat(self.fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> EntryClaim:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def claim_entry(entry: Path, *, wait: bool) -> EntryClaim | None:
    """The claim on the folder ``entry``; None when the folder is gone (its holder committed
    it). ``wait``: block while another process holds it; otherwise raise EntryHeld."""
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    claim = EntryClaim(entry, fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException as exc:
        claim.release()
        if isinstance(exc, BlockingIOError):
            raise EntryHeld(f"spool entry {entry.name} is held by another process") from None
        raise
    if not claim.present():  # removed while we waited, or listed just before its removal
        claim.release()
        return None
    return claim
