"""Writer process for the robustness test: commit runs in a loop, record each committed id."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from store.commit import commit_entry
from store.location import resolve
from store.spool.bundle import write_spool
from tests.store.bundles import host_bundle

store, seconds, out = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
loc = resolve(store)
deadline = time.monotonic() + seconds
with out.open("w") as log:
    while time.monotonic() < deadline:
        bundle = host_bundle(gpus=2)
        commit_entry(loc, write_spool(bundle, loc.spool_dir), timeout_s=30)
        log.write(bundle.run.run_id + "\n")
        log.flush()
