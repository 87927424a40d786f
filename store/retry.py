"""One retry loop for the store: jittered, doubling backoff until a deadline.

Opening a locked file, committing into a DuckLake that another writer just changed, and
creating a new lake catalog concurrently all wait the same way, so they share this loop.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def jittered(delay_s: float) -> float:
    """``delay_s`` scaled by a random factor in [0.5, 1.5): spreads writers that collided."""
    return delay_s * (0.5 + random.random())


def retry(
    attempt: Callable[[], T],
    *,
    transient: Callable[[Exception], bool],
    timeout_s: float,
    give_up: Callable[[Exception], Exception] | None = None,
    first_delay_s: float = 0.01,
    max_delay_s: float = 1.0,
) -> T:
    """Call ``attempt`` until it returns; retry while ``transient(exc)`` and time is left.

    A non-transient error propagates unchanged. When the next wait would pass the deadline,
    ``give_up(last_exc)`` is raised (chained to the last error), or without ``give_up`` the
    last error itself.
    """
    deadline = time.monotonic() + timeout_s
    delay = first_delay_s
    while True:
        try:
            return attempt()
        except Exception as exc:
            if not transient(exc):
                raise
            if time.monotonic() + delay > deadline:
                if give_up is None:
                    raise
                raise give_up(exc) from exc
        time.sleep(jittered(delay))
        delay = min(delay * 2, max_delay_s)
