"""Writer process for the lake concurrency test: commit runs in a loop for ``seconds`` and at
least ``MIN_RUNS`` times (a loaded machine commits fewer in the same time; the test counts
runs), log each committed id.

Alternates small runs (inlined in the catalog by DuckLake) and larger ones (Parquet files in
the data path), so both storage paths take concurrent writers.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from store.commit import commit_entry
from store.location import resolve
from store.spool.bundle import write_spool
from tests.store.bundles import host_bundle

MIN_RUNS = 2
store, seconds, out = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
loc = resolve(store)
deadline = time.monotonic() + seconds
n = 0
with out.open("w") as log:
    while n < MIN_RUNS or time.monotonic() < deadline:
        bundle = host_bundle(host=f"w{out.stem}", gpus=24 if n % 2 == 0 else 2)
        commit_entry(loc, write_spool(bundle, loc.spool_dir), timeout_s=60)
        log.write(f"{bundle.run.run_id} {len(bundle.tables['host_gpus']['gpu_index'])}\n")
        log.flush()
        n += 1
