"""Collector logging: plain text on a terminal, JSON lines otherwise (cron, systemd).

Text is one record per line with control characters shown escaped (a name holding a newline
or ``ESC[2J`` is data, never a second record or a cleared screen). With ``--log-format
json`` stderr carries JSON lines only: Python warnings become one record each, and when
the verb runs as ``python -m collectors`` the process's own stderr (fd 2: what C++ code,
child processes and libraries write there directly) is read line by line and each line
becomes a record too, its terminal colour codes removed.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import sys
import threading
import warnings
from datetime import UTC, datetime
from typing import IO

# C0 controls but tab, DEL, C1 controls, and the bidirectional overrides that reorder what a
# terminal shows ("Trojan Source", CVE-2021-42574)
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def printable(text: str) -> str:
    """``text`` on one line with every control character escaped (``\\n``, ``\\x1b``)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        return json.dumps(entry, default=str)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def _warning_to_log(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    file: IO[str] | None = None, line: str | None = None) -> None:  # fmt: skip
    """``warnings.showwarning``: a library's warning as one record, not two raw lines."""
    where = f"{os.path.basename(filename)}:{lineno}"
    logging.getLogger("stepscope.warnings").warning(f"{category.__name__}: {message} ({where})")


def setup(fmt: str | None, verb: str, verbose: bool = False,
          standalone: bool = False) -> logging.Logger:  # fmt: skip
    """Configure the ``stepscope`` logger tree on stderr; stdout is kept for ``--json``.
    ``standalone``: the process is the verb's own (``python -m collectors``): Python warnings
    become records, and in JSON so do fd 2's lines."""
    fmt = fmt or ("text" if sys.stderr.isatty() else "json")
    stream = _StderrLines.start() if fmt == "json" and standalone else sys.stderr
    handler = logging.StreamHandler(stream)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter(f"stepscope {verb}: %(message)s"))
    root = logging.getLogger("stepscope")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    if standalone:
        warnings.showwarning = _warning_to_log
    return logging.getLogger(f"stepscope.{verb}")


class _StderrLines:
    """fd 2 turned into a pipe read by a thread: every line written there (by C++ code, a
    child process, ``print(file=sys.stderr)``) is logged as a JSON record of its own, on a
    copy of the real stderr that only the log handler writes to."""

    @classmethod
    def start(cls) -> IO[str]:
        sys.stderr.flush()
        real = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        reader = threading.Thread(target=cls._read, args=(read_end,), daemon=True,
                                  name="stepscope-stderr")  # fmt: skip
        reader.start()

        def stop() -> None:  # the last writer gone, the reader sees the pipe's end
            sys.stderr.flush()
            os.dup2(real.fileno(), 2)
            reader.join(2.0)

        atexit.register(stop)
        return real

    @staticmethod
    def _read(fd: int) -> None:
        log = logging.getLogger("stepscope.stderr")
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                line = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip()
                if line.strip():
                    log.warning(line)
