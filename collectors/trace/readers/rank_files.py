"""The rank files of one run on the idle cores: workers read some of the files.

A run of several ranks is as many files of similar size. With K idle cores (``split.
spare_cores``, at most one fewer than the files), this process reads files 0, K+1, 2K+2...
and worker k (``python -m collectors.trace.readers.rank_files``, a fresh interpreter that imports only
the reader) reads files k, k+K+1, ...; each hands back its RawTraces. On a GPU host's
dozens of cores, eight ranks are read by eight processes at once. A file a worker could
not read is read again here, so its error or skip is exactly the one-process one. One
large file alone is shared chunk by chunk instead (``split``).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

from collectors.trace.columns import RawTrace
from collectors.trace.readers.kineto import read_trace
from collectors.trace.readers.kineto_split import spare_cores, start_worker, stop_workers


def read_all(files: list[Path]) -> list[tuple[Path, RawTrace | None]]:
    """(file, RawTrace) in file order; None where a worker failed and the caller must
    read the file itself (to raise, or skip, exactly as it would have)."""
    workers = min(spare_cores(), len(files) - 1)
    if workers < 1:
        return [(f, None) for f in files]
    shares = [files[i :: workers + 1] for i in range(workers + 1)]  # shares[0]: this process
    procs: list[subprocess.Popen] = []
    try:
        for share in shares[1:]:
            procs.append(start_worker("collectors.trace.readers.rank_files",
                                      json.dumps([str(f) for f in share])))  # fmt: skip
    except OSError:  # no workers today: the caller reads every file
        stop_workers(procs)
        return [(f, None) for f in files]
    try:
        read = {f: _read(f) for f in shares[0]}
        for share, proc in zip(shares[1:], procs, strict=True):
            out, _ = proc.communicate()
            got = _unpickle(out) if proc.returncode == 0 else None
            if not isinstance(got, list) or len(got) != len(share):
                got = [None] * len(share)  # the caller reads these files itself
            read.update(zip(share, got, strict=True))
    except BaseException:  # KeyboardInterrupt: no orphan workers
        stop_workers(procs)
        raise
    return [(f, read[f]) for f in files]


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
