"""Wait until every rank's torch.profiler trace from one ``/stop_profile`` is final.

vLLM writes one file per worker into ``torch_profiler_dir``; flushing a large trace takes
minutes, and a file still being written carries a ``.tmp`` suffix (a crashed worker leaves
it behind). A file is final when it has no ``.tmp`` suffix and its size stopped changing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from collectors.errors import MeasurementError

TRACE_SUFFIXES = (".json", ".json.gz")


def is_trace_name(name: str) -> bool:
    base = name[:-4] if name.endswith(".tmp") else name
    return base.endswith(TRACE_SUFFIXES)


def snapshot(trace_dir: Path) -> set[str]:
    """Names already in the folder (before /start_profile): never part of this run."""
    return {p.name for p in trace_dir.iterdir() if p.is_file() and is_trace_name(p.name)}


@dataclass
class WaitResult:
    files: list[Path]
    waited_s: float


def wait_for_traces(
    trace_dir: Path,
    before: set[str],
    expected: int | None,
    timeout_s: float,
    settle_s: float,
    log: logging.Logger,
    poll_s: float = 0.5,
    progress_every_s: float = 5.0,
    start: float | None = None,
) -> WaitResult:
    """Return the new final trace files once complete; MeasurementError on timeout.

    Complete: ``expected`` final files (when the world size is known), else at least one
    final file and nothing new, growing or ``.tmp`` for ``settle_s`` seconds.
    """
    start = time.monotonic() if start is None else start  # e.g. when /stop_profile was sent
    sizes: dict[str, int] = {}
    stable_since: float | None = None
    last_report = start
    while True:
        now = time.monotonic()
        current = {
            p.name: p.stat().st_size
            for p in _list(trace_dir)
            if p.name not in before and is_trace_name(p.name)
        }
        tmp = sorted(n for n in current if n.endswith(".tmp"))
        final = sorted(n for n in current if not n.endswith(".tmp"))
        unchanged = current == sizes and bool(current)
        sizes = current
        stable_since = (stable_since or now) if unchanged else None
        stable_for = 0.0 if stable_since is None else now - stable_since
        if final and not tmp and stable_for >= max(poll_s, 0.0):
            if expected is not None and len(final) >= expected:
                return WaitResult([trace_dir / n for n in final], now - start)
            if expected is None and stable_for >= settle_s:
                return WaitResult([trace_dir / n for n in final], now - start)
        if now - start > timeout_s:
            raise MeasurementError(_timeout_message(trace_dir, final, tmp, expected, timeout_s))
        if now - last_report >= progress_every_s:
            last_report = now
            mb = sum(sizes.values()) / 1e6
            want = f"/{expected}" if expected else ""
            log.info(f"waiting for trace files in {trace_dir}: {len(final)}{want} final, "
                     f"{len(tmp)} still .tmp, {mb:.1f} MB, {now - start:.0f} s of "
                     f"{timeout_s:.0f} s")  # fmt: skip
        time.sleep(poll_s)


def _list(trace_dir: Path) -> list[Path]:
    try:
        return [p for p in trace_dir.iterdir() if p.is_file()]
    except OSError:
        return []


def _timeout_message(
    trace_dir: Path, final: list[str], tmp: list[str], expected: int | None, timeout_s: float
) -> str:
    if not final and not tmp:
        return (
            f"{trace_dir}: no trace file appeared within {timeout_s:g} s of /stop_profile; "
            "is this the server's torch_profiler_dir, on this machine?"
        )
    if tmp:
        return (
            f"{trace_dir}: {len(tmp)} trace file(s) still .tmp after {timeout_s:g} s "
            f"({', '.join(tmp[:3])}): the flush has not finished or the worker crashed; "
            "raise --flush-timeout, or ingest later with: python -m collectors trace "
            f"{trace_dir}"
        )
    return (
        f"{trace_dir}: only {len(final)} of {expected} rank trace files appeared within "
        f"{timeout_s:g} s ({', '.join(final[:3])})"
    )
