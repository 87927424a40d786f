"""benchmarks/commit_phases.py once: its child really commits the entry.

Its child runs the commit's statements one by one, outside store/commit.py; this checks
that it leaves the spooled run in the store, so the phases it times are those
of a real commit. No timing here: figures live in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.commit_phases import FIXTURES
from collectors.trace.ingest import ingest_traces
from store.commit import commit_entry
from store.location import resolve
from store.spool.bundle import Bundle, RunRecord, utc_now_iso, write_spool
from tests.helpers import ROOT, query

TRACE = FIXTURES / "vllm_mi300x_decode_fullgraph_bs32.json.gz"


def test_the_timed_commit_commits_the_whole_run(tmp_path: Path) -> None:
    result = ingest_traces([TRACE], log=logging.getLogger("test"))
    now = utc_now_iso()
    entry = write_spool(Bundle(RunRecord("trace-phases", "trace", "h", now, now),
                               result.tables), tmp_path / "spool")  # fmt: skip
    other = write_spool(Bundle(RunRecord("trace-other", "trace", "h", now, now),
                               {"trace_ranks": result.tables["trace_ranks"]}),
                        tmp_path / "spool-other")  # fmt: skip
    store = tmp_path / "s.duckdb"
    commit_entry(resolve(store), other)
    done = subprocess.run([sys.executable, "-m", "benchmarks.commit_phases", "--child",
                           str(store), str(entry)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    phases = json.loads(done.stdout)
    assert list(phases) == ["open", "upgrade", "run row", "inserts", "COMMIT",
                            "close + checkpoint", "total"]  # fmt: skip
    assert query(store, "SELECT run_id FROM runs ORDER BY run_id") == [("trace-other",),
                                                                        ("trace-phases",)]
    kernels = query(store, "SELECT count(*) FROM trace_kernels WHERE run_id = 'trace-phases'")
    assert kernels == [(len(result.tables["trace_kernels"]),)]
    assert not (store.parent / (store.name + ".wal")).exists()  # checkpointed on close
    shutil.rmtree(entry)
