"""Store read and commit costs: what the data-version cache buys the dashboard.

Builds a store of N host runs through the real spool -> commit path, then times
(a) a commit, (b) an Overview query through store.reader uncached (fresh connection,
what a user's script does) and cached (unchanged data version: one stat), as medians.

    python -m benchmarks.store_read --runs 1000 --repeat 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from store.commit import commit_entry
from store.location import resolve
from store.queries import overview as queries
from store.reader import clear_cache
from store.spool.bundle import write_spool
from tests.store.bundles import host_bundle


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        loc = resolve(Path(tmp) / "s.duckdb")
        commit_ms = []
        for i in range(args.runs):
            bundle = host_bundle(f"host-{i % 20}", gpus=8)
            start = time.perf_counter()
            commit_entry(loc, write_spool(bundle, loc.spool_dir))
            commit_ms.append((time.perf_counter() - start) * 1000)

        def uncached() -> None:
            clear_cache()
            queries.recent_runs(loc, limit=100)
            queries.freshness(loc)

        def cached() -> None:
            queries.recent_runs(loc, limit=100)
            queries.freshness(loc)

        cached()
        print(f"runs in store:                     {args.runs}")
        print(f"spool + commit, one run (median):  {statistics.median(commit_ms):.1f} ms")
        print(f"Overview queries, uncached:        {_median_ms(uncached, args.repeat):.1f} ms")
        print(f"Overview queries, cached:          {_median_ms(cached, args.repeat):.2f} ms")


if __name__ == "__main__":
    main()
