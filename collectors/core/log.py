"""Collector logging: plain text on a terminal, JSON lines otherwise (cron, systemd)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        return json.dumps(entry, default=str)


def setup(fmt: str | None, verb: str, verbose: bool = False) -> logging.Logger:
    """Configure the ``stepscope`` logger tree on stderr; stdout is kept for ``--json``."""
    fmt = fmt or ("text" if sys.stderr.isatty() else "json")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(f"stepscope {verb}: %(message)s"))
    root = logging.getLogger("stepscope")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    return logging.getLogger(f"stepscope.{verb}")
