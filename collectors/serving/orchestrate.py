"""Profile orchestration steps every engine shares: load progress and failure checks."""

from __future__ import annotations

import logging
from collections.abc import Callable

from collectors.errors import MeasurementError
from collectors.serving import load


def progress(log: logging.Logger) -> Callable[[int, int], None]:
    """Log the load's progress at each quarter."""
    step = {"next": 0.0}

    def report(done: int, total: int) -> None:
        if done / total >= step["next"]:
            log.info(f"load: {done}/{total} requests done")
            step["next"] += 0.25

    return report


def check_load(results: list[load.RequestResult], base: str, what: str) -> None:
    failed = [r for r in results if not r.ok]
    if failed:
        raise MeasurementError(
            f"{base}: {len(failed)} of {len(results)} {what} request(s) failed - did the server "
            f"stop? first error: {failed[0].error}"
        )


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"
