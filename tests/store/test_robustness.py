"""Concurrency and crash safety with real processes on a real DuckDB file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from collectors.core.errors import EXIT_INTERRUPTED
from store.commit import commit_entry
from store.location import resolve
from store.spool.bundle import pending_entries, write_spool
from tests.helpers import ROOT, cli_env, query, run_cli
from tests.store.bundles import host_bundle
from tests.store.holders import FILE_HOLDER, held_by_another_process

pytestmark = pytest.mark.slow


def _spawn(script: str, *args: str, store: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.store.{script}", *args],
        cwd=ROOT, env=cli_env(store), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_writer_and_readers_for_20_seconds_lose_nothing(store_path: Path, tmp_path: Path) -> None:
    # The store exists before readers start, as on any machine that ran a collector once.
    loc = resolve(store_path)
    commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
    committed_log = tmp_path / "committed.txt"
    writer = _spawn("stress_writer", str(store_path), "20", str(committed_log), store=store_path)
    readers = [_spawn("stress_reader", str(store_path), "20", store=store_path) for _ in range(2)]
    w_out, w_err = writer.communicate(timeout=120)
    assert writer.returncode == 0, w_err
    results = []
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err
        results.append(json.loads(out))
    committed = committed_log.read_text().split()
    assert len(committed) > 10  # the writer really ran in a loop
    stored = {row[0] for row in query(store_path, "SELECT run_id FROM runs")}
    assert set(committed) <= stored, "a run the writer committed is missing"
    assert query(store_path, "SELECT count(*) FROM host_gpus")[0][0] == 2 * len(committed)
    for res in results:
        assert res["errors"] == 0, res["messages"]
        assert res["reads"] > 10


def test_busy_store_exits_75_keeps_bundle_and_says_what_to_run(store_path: Path) -> None:
    assert run_cli(store_path, "host").code == 0
    with held_by_another_process(FILE_HOLDER, store_path):
        result = run_cli(store_path, "host", "--commit-timeout", "1", "--json")
    assert result.code == 75
    assert "busy" in result.stderr and "python -m collectors flush" in result.stderr
    run_id = result.json["run_id"]
    spool = Path(str(store_path) + ".spool")
    assert (spool / run_id / "manifest.json").exists()
    flushed = run_cli(store_path, "flush", "--json")
    assert flushed.code == 0 and flushed.json["committed"] == [run_id]
    assert query(store_path, "SELECT count(*) FROM runs WHERE run_id = ?", [run_id])[0][0] == 1


def test_collector_killed_after_spooling_loses_nothing(store_path: Path) -> None:
    assert run_cli(store_path, "host").code == 0
    spool = Path(str(store_path) + ".spool")
    with held_by_another_process(FILE_HOLDER, store_path):  # keeps the collector between spool and commit
        proc = subprocess.Popen(
            [sys.executable, "-m", "collectors", "host", "--commit-timeout", "120"],
            cwd=ROOT, env=cli_env(store_path), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            p.is_dir() and not p.name.startswith(".") for p in spool.iterdir()
        ):
            time.sleep(0.05)
        entries = [p.name for p in spool.iterdir() if p.is_dir() and not p.name.startswith(".")]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(entries) == 1, "the collector never spooled its run"
    before = query(store_path, "SELECT count(*) FROM runs")[0][0]
    flushed = run_cli(store_path, "flush", "--json")
    assert flushed.code == 0 and flushed.json["committed"] == entries
    assert query(store_path, "SELECT count(*) FROM runs")[0][0] == before + 1
    assert run_cli(store_path, "flush", "--json").json["committed"] == []  # committed once


def _ctrl_c_as_in_a_terminal() -> None:
    """A suite started in the background (``cmd &`` without job control, nohup) hands its
    children SIGINT ignored, and Python then installs no KeyboardInterrupt handler: give the
    collector the default a terminal gives it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_the_store_is_busy_keeps_the_run_for_the_next_flush(
    store_path: Path,
) -> None:
    """SIGINT to a collector that waits on a busy store after spooling: it stops at once
    (exit 130) and the run waits in the spool, unclaimed, for the next flush."""
    assert run_cli(store_path, "host").code == 0
    spool = Path(str(store_path) + ".spool")
    with held_by_another_process(FILE_HOLDER, store_path):
        proc = subprocess.Popen(
            [sys.executable, "-m", "collectors", "host", "--commit-timeout", "120",
             "--log-format", "text"],
            cwd=ROOT, env=cli_env(store_path), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_in_a_terminal,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not pending_entries(spool):
            time.sleep(0.05)
        time.sleep(0.5)  # retrying the busy store now
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_INTERRUPTED and "interrupted" in err, err
    assert "kept in the spool" in err and "python -m collectors flush" in err, err
    (entry,) = pending_entries(spool)
    flushed = run_cli(store_path, "flush", "--json")
    assert flushed.code == 0 and flushed.json["committed"] == [entry.name]
    assert query(store_path, "SELECT count(*) FROM runs")[0][0] == 2


def test_next_collector_run_commits_the_backlog(store_path: Path) -> None:
    assert run_cli(store_path, "host").code == 0
    with held_by_another_process(FILE_HOLDER, store_path):
        busy = run_cli(store_path, "host", "--commit-timeout", "0.5", "--json")
    assert busy.code == 75
    again = run_cli(store_path, "host")
    assert again.code == 0 and "also committed 1 earlier spooled run" in again.stderr
    assert query(store_path, "SELECT count(*) FROM runs WHERE run_id = ?",
                 [busy.json["run_id"]])[0][0] == 1  # fmt: skip


def test_corrupt_spool_entry_through_the_cli(store_path: Path) -> None:
    assert run_cli(store_path, "host").code == 0
    spool = Path(str(store_path) + ".spool")
    bad = spool / "20260101T000000Z-host-deadbeef"
    bad.mkdir(parents=True)
    (bad / "manifest.json").write_text('{"format": 1, "run": {"run_id": "x"}}')
    result = run_cli(store_path, "flush")
    assert result.code == 0
    assert "corrupt" in result.stderr and "moved to" in result.stderr and bad.name in result.stderr
    assert not bad.exists() and any((spool / "corrupt").iterdir())
    assert query(store_path, "SELECT count(*) FROM runs WHERE run_id = ?", [bad.name])[0][0] == 0


def test_reader_of_a_busy_store_waits_instead_of_failing(store_path: Path) -> None:
    assert run_cli(store_path, "host").code == 0
    con = duckdb.connect(str(store_path))  # held read-write briefly, like a commit
    proc = _spawn("stress_reader", str(store_path), "1.5", store=store_path)
    time.sleep(0.5)
    con.close()
    out, err = proc.communicate(timeout=60)
    res = json.loads(out)
    assert res["errors"] == 0 and res["reads"] > 0, (res, err)


@pytest.mark.parametrize(
    "content", [b"run_id,verb\nr1,host\n", b"PAR1" + bytes(60), b""], ids=["csv", "parquet", "empty"]
)
def test_a_store_path_that_is_another_kind_of_file_keeps_the_run_in_the_spool(
    tmp_path: Path, content: bytes
) -> None:
    """A CSV, a Parquet file or an empty file where the store should be: the commit says
    so, the run stays in the spool and the file is untouched (DuckDB would open the first
    two as in-memory views, and a commit there would keep nothing)."""
    from store.connect import connection
    from store.errors import StoreError

    loc = resolve(tmp_path / "store.duckdb")
    entry = write_spool(host_bundle(gpus=1), loc.spool_dir)
    assert loc.path is not None
    loc.path.write_bytes(content)
    with pytest.raises(StoreError, match="is not a DuckDB database file"):
        commit_entry(loc, entry)
    with pytest.raises(StoreError, match="is not a DuckDB database file"), \
            connection(loc, read_only=True):  # fmt: skip
        pass
    assert entry.exists() and loc.path.read_bytes() == content
