"""Collectors started at once on one new store: each exits truthfully and every run lands.

Each collector commits its own spool entry, then flushes what else waits there: the
entries of the others, which they are spooling or committing at that very moment. A flush
must leave those to their owners (store/spool/claim.py); issue 22 saw 3-4 of 6 exit 1 with
another's entry "corrupt" and the move aside failing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.core.errors import EXIT_OK, EXIT_STORE_BUSY
from store.spool.bundle import CORRUPT_DIR
from tests.helpers import ROOT, cli_env, query

pytestmark = pytest.mark.slow


def _start_at_once(store: Path, count: int) -> list[subprocess.Popen]:
    command = [sys.executable, "-m", "collectors", "host", "--json", "--log-format", "text"]
    return [subprocess.Popen(command, cwd=ROOT, env=cli_env(store), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for _ in range(count)]  # fmt: skip


@pytest.mark.parametrize("count", [6, 12])
def test_collectors_started_at_once_all_exit_truthfully_and_land(tmp_path: Path, count: int):
    for trial in range(3):  # a new store each time: the first commits also create the schema
        store = tmp_path / f"trial-{trial}" / "s.duckdb"
        spool = Path(f"{store}.spool")
        procs = _start_at_once(store, count)
        landed, kept = set(), set()
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode in (EXIT_OK, EXIT_STORE_BUSY), err
            assert "internal error" not in err and "Traceback" not in err, err
            summary = json.loads(out.splitlines()[-1])
            if proc.returncode == EXIT_OK:
                assert summary["committed"] is True, out
                landed.add(summary["run_id"])
            else:  # busy for the whole --commit-timeout: the run must wait in the spool
                assert (spool / summary["run_id"] / "manifest.json").is_file(), err
                kept.add(summary["run_id"])
        assert len(landed | kept) == count
        stored = {row[0] for row in query(store, "SELECT run_id FROM runs")}
        assert landed <= stored, "a collector said committed for a run that is not stored"
        assert not (spool / CORRUPT_DIR).exists(), list((spool / CORRUPT_DIR).iterdir())
        pending = {p.name for p in spool.iterdir() if p.is_dir()} if spool.is_dir() else set()
        assert pending == kept - stored
