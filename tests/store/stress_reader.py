"""Reader process for the robustness test: query like a page does, count results and errors."""

from __future__ import annotations

import json
import sys
import time

from store.location import resolve
from store.queries import overview as queries

store, seconds = sys.argv[1], float(sys.argv[2])
loc = resolve(store)
deadline = time.monotonic() + seconds
reads = errors = 0
last_count = 0
messages: list[str] = []
while time.monotonic() < deadline:
    try:
        runs = queries.recent_runs(loc, limit=100_000)
        if len(runs) < last_count:
            raise AssertionError(f"run count went down: {last_count} -> {len(runs)}")
        last_count = len(runs)
        queries.freshness(loc)
        reads += 1
    except Exception as exc:  # every failure counts: the test wants zero
        errors += 1
        messages.append(f"{type(exc).__name__}: {exc}")
print(json.dumps({"reads": reads, "errors": errors, "messages": messages[:5]}))
