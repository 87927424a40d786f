"""Four writer and two reader processes on one fresh lake: nothing lost, no reader errors.

The lake starts empty, so the writers also race to create the catalog and apply the
migrations: what several cron jobs on several hosts do on their first night.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.connect import connection
from store.location import resolve
from tests.helpers import ROOT
from tests.lake.conftest import Lake

pytestmark = pytest.mark.slow
SECONDS = 15
WRITERS, READERS = 4, 2


def _spawn(module: str, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_four_writers_two_readers_lose_nothing(lake: Lake, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT), **lake.env()}
    logs = [tmp_path / f"{i}.txt" for i in range(WRITERS)]
    writers = [
        _spawn("tests.lake.lake_writer", lake.url, str(SECONDS), str(log), env=env) for log in logs
    ]
    # Readers join once the first run is in (a reader of a store that is still being
    # created is told so plainly; that is not what this test counts).
    deadline = time.monotonic() + 60
    while not any(log.exists() and log.read_text() for log in logs):
        assert time.monotonic() < deadline, "no writer committed within 60 s"
        dead = [w for w in writers if w.poll() is not None]
        assert not dead, dead[0].communicate()[1][-3000:]
        time.sleep(0.1)
    readers = [
        _spawn("tests.store.stress_reader", lake.url, str(SECONDS), env=env) for _ in range(READERS)
    ]
    for w in writers:
        _out, err = w.communicate(timeout=180)
        assert w.returncode == 0, err[-3000:]
    results = []
    for r in readers:
        out, err = r.communicate(timeout=180)
        assert r.returncode == 0, err[-3000:]
        results.append(json.loads(out))

    committed = {}
    for log in logs:
        lines = [line.split() for line in log.read_text().splitlines()]
        assert lines, f"writer {log.stem} committed nothing"
        committed.update({run_id: int(gpus) for run_id, gpus in lines})
    assert len(committed) >= 2 * WRITERS  # the writers really ran in a loop (lake_writer)
    loc = resolve(lake.url)
    with connection(loc, read_only=True) as con:
        stored = dict(con.execute("SELECT run_id, count(*) FROM runs GROUP BY run_id").fetchall())
        gpus = dict(
            con.execute("SELECT run_id, count(*) FROM host_gpus GROUP BY run_id").fetchall()
        )
    missing = set(committed) - set(stored)
    assert not missing, f"{len(missing)} committed run(s) are not in the lake"
    assert all(n == 1 for n in stored.values()), "a run was stored twice"
    assert gpus == committed, "a run's rows are missing or duplicated"
    for res in results:
        assert res["errors"] == 0, res["messages"]
        assert res["reads"] > 5
    print(
        f"lake concurrency: {len(committed)} runs by {WRITERS} writers in {SECONDS} s, "
        f"{sum(r['reads'] for r in results)} reads by {READERS} readers, 0 errors"
    )


def test_two_flushes_of_one_spool_store_each_run_once(migrated_lake: Lake, tmp_path: Path) -> None:
    """No UNIQUE in a lake: the per-entry lock keeps two flushes from doubling a run."""
    import os

    from store.spool.bundle import write_spool
    from tests.store.bundles import host_bundle

    loc = resolve(migrated_lake.url)
    os.environ["STEPSCOPE_SPOOL"] = str(migrated_lake.spool)
    try:
        ids = [write_spool(host_bundle(gpus=2), migrated_lake.spool).name for _ in range(6)]
    finally:
        del os.environ["STEPSCOPE_SPOOL"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **migrated_lake.env()}
    procs = [
        _spawn("collectors", "flush", "--store", migrated_lake.url, "--log-format", "text", env=env)
        for _ in range(2)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    with connection(loc, read_only=True) as con:
        stored = dict(con.execute("SELECT run_id, count(*) FROM runs GROUP BY run_id").fetchall())
        gpus = con.execute("SELECT count(*) FROM host_gpus").fetchone()[0]
    assert stored == {run_id: 1 for run_id in ids}
    assert gpus == 2 * len(ids)
