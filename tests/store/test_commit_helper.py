"""The commit helper: a forked process that commits a spool entry as an in-process commit
would (store/commit_helper.py), and never loses the entry when it fails or dies."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from collectors.errors import EXIT_OK, EXIT_STORE_BUSY
from store.bundle import write_spool
from store.commit import flush
from store.commit_helper import CommitHelper, _picklable
from store.errors import StoreBusy
from store.location import StoreLocation
from tests.helpers import ROOT, query
from tests.store.bundles import host_bundle
from tests.store.holders import FILE_HOLDER, held_by_another_process


def _gone(pid: int) -> bool:
    """The process exited: no /proc entry, or a zombie (state Z) not yet reaped by its
    parent (for an orphan, init, which in a container may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _scenario(name: str, loc: StoreLocation) -> dict:
    """Run tests/store/helper_scenarios.py's NAME in a fresh interpreter (no other thread)."""
    out = subprocess.run([sys.executable, "-m", "tests.store.helper_scenarios", name,
                          str(loc.path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _existing_store(loc: StoreLocation) -> None:
    """Commit one run, so that another process can hold the store open."""
    write_spool(host_bundle(host="first"), loc.spool_dir)
    flush(loc)


def test_the_helper_commits_the_entry_and_the_backlog_then_is_reaped(loc: StoreLocation):
    out = _scenario("commit_with_backlog", loc)
    assert out["inserted"] and out["run_id"] == out["entry"]
    assert out["backlog"] == [out["waiting"]]  # the run a busy store had left in the spool
    assert out["left"] == [] and out["reaped"]
    assert query(loc.path, "SELECT host FROM runs ORDER BY host") == [("earlier",), ("now",)]
    assert query(loc.path, "SELECT count(*) FROM host_gpus") == [(3,)]


def test_the_helper_raises_store_busy_and_the_entry_stays(loc: StoreLocation):
    _existing_store(loc)
    with held_by_another_process(FILE_HOLDER, loc.path):
        out = _scenario("busy", loc)
    assert "busy" in out["raised"] and out["entry_kept"] and out["reaped"]


def test_a_helper_with_nothing_to_commit_leaves_when_closed(loc: StoreLocation):
    assert _scenario("nothing_to_commit", loc)["reaped"]


def test_a_dead_helper_means_an_in_process_commit_with_nothing_lost(loc: StoreLocation):
    out = _scenario("dead_helper", loc)
    assert out["code"] == EXIT_OK and out["left"] == [] and out["reaped"]
    assert query(loc.path, "SELECT run_id, host FROM runs") == [(out["run_id"], "survivor")]


def test_a_busy_store_through_the_helper_keeps_the_run_in_the_spool(loc: StoreLocation):
    _existing_store(loc)
    with held_by_another_process(FILE_HOLDER, loc.path):
        out = _scenario("busy_through_submit", loc)
    assert out["code"] == EXIT_STORE_BUSY and out["kept"]


def test_the_early_job_runs_in_the_helper_before_the_commit(loc: StoreLocation):
    out = _scenario("early_job", loc)
    assert out["ran_in"] == out["helper"] == out["again"]  # read once, kept
    assert out["inserted"] and out["reaped"]


def test_an_early_job_that_raises_gives_none_and_the_commit_goes_on(loc: StoreLocation):
    assert _scenario("early_job_raises", loc) == {"early": None, "inserted": True}


def test_the_environment_comes_from_the_helper_else_is_taken_in_process(loc: StoreLocation):
    out = _scenario("environment_from_helper", loc)
    assert out["first"] == out["helper"] != out["self"]
    assert out["second"] == {"taken_in": out["helper"]}  # each caller gets its own copy
    assert out["code"] == EXIT_OK and out["after_death"] == out["self"]
    env = query(loc.path, "SELECT env FROM runs WHERE host = 'with-env'")[0][0]
    assert json.loads(env) == {"taken_in": out["helper"]}


def test_a_helper_that_fails_to_start_never_returns_into_the_caller(loc: StoreLocation):
    """One JSON line on stdout: a child that escaped ``start`` would go on to print its own."""
    out = subprocess.run([sys.executable, "-m", "tests.store.helper_scenarios",
                          "helper_that_fails_to_start", str(loc.path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["exit"] == 1


def test_no_helper_while_another_thread_runs(loc: StoreLocation):
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert CommitHelper.start(loc) is None  # a fork would copy no other thread's locks
    finally:
        stop.set()
        other.join()


def test_no_helper_once_duckdb_has_started_its_worker_thread(loc: StoreLocation):
    """A native thread counts as much as a Python one (store/commit_helper.py _threads)."""
    assert _scenario("after_duckdb_import", loc) == {"before": True, "after": False}


def test_an_exception_that_pickle_cannot_carry_arrives_as_its_text():
    class Local(Exception):  # a class pickle cannot find by name
        pass

    sent = _picklable(Local("the store's disk is full"))
    assert isinstance(sent, RuntimeError) and str(sent) == "Local: the store's disk is full"
    busy = StoreBusy("store s is busy")
    assert _picklable(busy) is busy


def _waiting_on_busy_store(loc: StoreLocation) -> tuple[subprocess.Popen, int]:
    """A collector whose helper retries the store (held by the caller); and its pid."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.helper_scenarios",
                             "wait_on_busy_store", str(loc.path)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    helper_pid = int(proc.stdout.readline())
    time.sleep(0.5)  # the helper has the entry and retries the busy store
    assert not _gone(helper_pid)
    return proc, helper_pid


def test_the_helper_dies_with_its_collector(loc: StoreLocation):
    """SIGKILL of a collector whose helper waits on a busy store takes the helper too: no
    orphan commits behind the user's back, and the entry waits for ``flush``."""
    _existing_store(loc)
    with held_by_another_process(FILE_HOLDER, loc.path):
        proc, helper_pid = _waiting_on_busy_store(loc)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _gone(helper_pid):
            time.sleep(0.02)
        assert _gone(helper_pid)
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'waiting'") == [(0,)]
    assert flush(loc).committed != []  # the killed collector's run, committed once
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'waiting'") == [(1,)]


def test_ctrl_c_in_the_collector_stops_the_helper_s_commit(loc: StoreLocation):
    """SIGINT to the collector alone (not its process group) still ends the helper's
    commit at once; the run waits in the spool, as after an interrupted in-process one."""
    _existing_store(loc)
    with held_by_another_process(FILE_HOLDER, loc.path):
        proc, helper_pid = _waiting_on_busy_store(loc)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        assert json.loads(out)["interrupted"] and _gone(helper_pid)
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'waiting'") == [(0,)]
    assert flush(loc).committed != []  # nothing lost: the next flush commits it
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'waiting'") == [(1,)]
