"""The rank files of one run on two cores: a worker reads every other file.

A run of several ranks is as many files of similar size; while this process reads files
0, 2, 4..., a worker (``python -m collectors.trace.ranks``, a fresh interpreter that
imports only the reader) reads 1, 3, 5... and hands back their RawTraces. A file the
worker could not read is read again here, so its error or skip is exactly the one-process
one. One large file alone is shared chunk by chunk instead (``split``).
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

from collectors.trace.columns import RawTrace
from collectors.trace.reader import read_trace
from collectors.trace.split import spare_core, start_worker


def read_all(files: list[Path]) -> Iterator[tuple[Path, RawTrace | None]]:
    """(file, RawTrace) in file order; None where the worker failed and the caller must
    read the file itself (to raise, or skip, exactly as it would have)."""
    if len(files) < 2 or not spare_core():
        for f in files:
            yield f, None
        return
    theirs = files[1::2]
    try:
        proc = start_worker("collectors.trace.ranks", json.dumps([str(f) for f in theirs]))
    except OSError:  # no worker today: the caller reads every file
        for f in files:
            yield f, None
        return
    try:
        mine = {f: _read(f) for f in files[0::2]}
        out, _ = proc.communicate()
    except BaseException:  # KeyboardInterrupt: no orphan worker
        proc.kill()
        proc.communicate()
        raise
    got = _unpickle(out) if proc.returncode == 0 else None
    if not isinstance(got, list) or len(got) != len(theirs):
        got = [None] * len(theirs)  # the caller reads these files itself
    read = {**mine, **dict(zip(theirs, got, strict=True))}
    for f in files:
        yield f, read[f]


def _unpickle(out: bytes) -> object:
    try:
        return pickle.loads(out)
    except Exception:  # noqa: BLE001 - a broken answer is no answer
        return None


def _read(path: Path) -> RawTrace | None:
    """One file in one pass; None if it fails (the caller reads it again to report it)."""
    try:
        return read_trace(path, parallel=False)
    except Exception:  # noqa: BLE001 - re-read by the caller, in file order
        return None


def main() -> None:
    """The worker: read each file named; None for one that fails."""
    out = [_read(Path(name)) for name in json.loads(sys.argv[1])]
    sys.stdout.buffer.write(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    main()
