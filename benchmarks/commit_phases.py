"""Where a small commit's time goes: each statement of the commit, in fresh processes.

    python -m benchmarks.commit_phases [TRACE] [--other TRACE2] [--repeat 9]

TRACE (default: the fixtures' vLLM MI300X full-graph decode trace, 434 kernels) is spooled
once; every run copies a store that holds TRACE2's run and commits that entry in a fresh
process, timing each phase the way store/commit.py runs it: the store opened read-write
through store/connect.py (turnstile, ``duckdb.connect(path)``), migrations checked, the run
row, one INSERT per table and the runs row in one transaction, COMMIT, then close (which
checkpoints and releases the file). The process imports duckdb through ``store`` before
the clock starts. Medians in ms.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "traces" / "tracelens"


def _child(store: Path, entry: Path) -> dict[str, float]:
    """One commit of ``entry`` into ``store``, phase by phase (ms)."""
    from store import migrate
    from store.commit import _create_run_row_table, _select_rows
    from store.connect import open_with_retry
    from store.location import resolve
    from store.spool.bundle import read_manifest

    manifest = read_manifest(entry)
    phases: dict[str, float] = {}
    start = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal start
        now = time.perf_counter()
        phases[name] = (now - start) * 1e3
        start = now

    con = open_with_retry(resolve(store), read_only=False, timeout_s=10)
    mark("open")
    migrate.upgrade(con)
    mark("upgrade")
    _create_run_row_table(con, manifest["run"], Path(tempfile.mkdtemp()))
    mark("run row")
    con.execute("BEGIN TRANSACTION")
    for name, info in manifest["tables"].items():
        if info.get("rows"):
            con.execute(f"INSERT INTO {name} BY NAME " + _select_rows(entry, info))
    con.execute("INSERT INTO runs BY NAME SELECT *, now() AS committed_at FROM spool_run")
    mark("inserts")
    con.execute("COMMIT")
    mark("COMMIT")
    con.close()
    mark("close + checkpoint")
    phases["total"] = sum(phases.values())
    return phases


def _spool(trace: Path, into: Path) -> Path:
    import logging

    from collectors.trace.ingest import ingest_traces
    from store.spool.bundle import Bundle, RunRecord, content_run_id, utc_now_iso, write_spool

    result = ingest_traces([trace], log=logging.getLogger("commit_phases"))
    now = utc_now_iso()
    run = RunRecord(content_run_id("trace", result.digest), "trace", "h", now, now)
    return write_spool(Bundle(run, result.tables), into)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", type=Path,
                        default=FIXTURES / "vllm_mi300x_decode_fullgraph_bs32.json.gz")
    parser.add_argument("--other", type=Path,
                        default=FIXTURES / "sglang_qwen3_8b_decode.json.gz")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--child", nargs=2, metavar=("STORE", "ENTRY"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.child:
        store, entry = args.child
        print(json.dumps(_child(Path(store), Path(entry))))
        return

    from store.commit import commit_entry
    from store.location import resolve

    work = Path(tempfile.mkdtemp(prefix="commit-phases-"))
    try:
        base = work / "base.duckdb"
        commit_entry(resolve(base), _spool(args.other, work / "spool-other"))
        entry = _spool(args.trace, work / "spool")
        runs: list[dict[str, float]] = []
        for i in range(args.repeat):
            store = work / f"commit-{i}.duckdb"
            shutil.copy(base, store)
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.commit_phases", "--child", str(store),
                 str(entry)],
                cwd=ROOT, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs.append(json.loads(done.stdout))
        phases = list(runs[0])
        print("| " + " | ".join(phases) + " |")
        print("|" + "---:|" * len(phases))
        print("| " + " | ".join(f"{statistics.median(r[p] for r in runs):.1f}"
                                for p in phases) + " |")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
