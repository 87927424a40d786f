"""The commit helper: a forked process that commits a spool entry as an in-process commit
would (store/commit_helper.py), and never loses the entry when it fails or dies."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path

import pytest

from collectors.context import Context
from collectors.errors import EXIT_OK, EXIT_STORE_BUSY
from store.bundle import write_spool
from store.commit_helper import CommitHelper, _picklable
from store.errors import StoreBusy
from store.location import StoreLocation
from tests.helpers import query
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


def _reaped(pid: int) -> bool:
    """Our own child exited and was waited for."""
    return not Path(f"/proc/{pid}").exists()


def _context(loc: StoreLocation, commit_timeout: float | None = None) -> Context:
    args = argparse.Namespace(dry_run=False, json=False, commit_timeout=commit_timeout,
                              label=None, host_name=None)  # fmt: skip
    return Context(verb="host", args=args, log=logging.getLogger("stepscope.test"), loc=loc)


def test_the_helper_commits_the_entry_and_the_backlog_then_is_reaped(loc: StoreLocation):
    waiting = write_spool(host_bundle(host="earlier", gpus=1), loc.spool_dir)  # a busy day's run
    bundle = host_bundle(host="now", gpus=2)
    helper = CommitHelper.start(loc)
    assert helper is not None and helper.pid != os.getpid()
    entry = write_spool(bundle, loc.spool_dir)
    result, backlog = helper.commit(entry, timeout_s=10)
    assert (result.run_id, result.inserted) == (bundle.run.run_id, True)
    assert backlog is not None and backlog.committed == [waiting.name]
    assert not entry.exists() and not waiting.exists()
    assert query(loc.path, "SELECT host FROM runs ORDER BY host") == [("earlier",), ("now",)]
    assert query(loc.path, "SELECT count(*) FROM host_gpus") == [(3,)]
    assert _reaped(helper.pid)


def test_the_helper_raises_store_busy_and_the_entry_stays(loc: StoreLocation):
    write_spool(host_bundle(), loc.spool_dir)  # creates the store's folder
    from store.commit import flush

    flush(loc)  # an existing store, so another process can hold it open
    bundle = host_bundle(host="busy")
    with held_by_another_process(FILE_HOLDER, loc.path):
        helper = CommitHelper.start(loc)
        entry = write_spool(bundle, loc.spool_dir)
        with pytest.raises(StoreBusy, match="busy"):
            helper.commit(entry, timeout_s=0.5)
    assert entry.is_dir()
    assert _gone(helper.pid)


def test_a_helper_with_nothing_to_commit_leaves_when_closed(loc: StoreLocation):
    helper = CommitHelper.start(loc)
    helper.close()
    assert _reaped(helper.pid)
    helper.close()  # twice is harmless: a verb's error path and the CLI's finally both close


def test_a_dead_helper_means_an_in_process_commit_with_nothing_lost(loc: StoreLocation):
    ctx = _context(loc)
    ctx.start_commit_helper()
    pid = ctx.commit_helper.pid
    os.kill(pid, signal.SIGKILL)
    bundle = host_bundle(host="survivor", gpus=1)
    assert ctx.submit(bundle) == EXIT_OK
    assert query(loc.path, "SELECT run_id, host FROM runs") == [(bundle.run.run_id, "survivor")]
    assert list(loc.spool_dir.iterdir()) == []
    assert _gone(pid)


def test_a_busy_store_through_the_helper_keeps_the_run_in_the_spool(loc: StoreLocation):
    ctx = _context(loc)
    assert ctx.submit(host_bundle(host="first")) == EXIT_OK  # creates the store
    ctx = _context(loc, commit_timeout=0.5)
    with held_by_another_process(FILE_HOLDER, loc.path):
        ctx.start_commit_helper()
        assert ctx.commit_helper is not None
        bundle = host_bundle(host="second")
        assert ctx.submit(bundle) == EXIT_STORE_BUSY
    assert (loc.spool_dir / bundle.run.run_id).is_dir()


def test_no_helper_while_another_thread_runs(loc: StoreLocation):
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert CommitHelper.start(loc) is None  # a fork would copy no other thread's locks
    finally:
        stop.set()
        other.join()


def test_an_exception_that_pickle_cannot_carry_arrives_as_its_text():
    class Local(Exception):  # a class pickle cannot find by name
        pass

    sent = _picklable(Local("the store's disk is full"))
    assert isinstance(sent, RuntimeError) and str(sent) == "Local: the store's disk is full"
    busy = StoreBusy("store s is busy")
    assert _picklable(busy) is busy


def test_the_helper_dies_with_its_collector(loc: StoreLocation):
    """SIGKILL of a collector whose helper waits on a busy store takes the helper too: no
    orphan commits behind the user's back, and the entry waits for ``flush``."""
    import subprocess
    import sys
    import time

    from store.commit import flush
    from tests.helpers import ROOT

    write_spool(host_bundle(), loc.spool_dir)
    flush(loc)  # an existing store, so another process can hold it
    probe = ("import sys\nfrom store.commit_helper import CommitHelper\n"
             "from store.bundle import write_spool\nfrom store.location import resolve\n"
             "from tests.store.bundles import host_bundle\n"
             "loc = resolve(sys.argv[1]); h = CommitHelper.start(loc)\n"
             "entry = write_spool(host_bundle(host='killed'), loc.spool_dir)\n"
             "print(h.pid, flush=True)\nh.commit(entry, timeout_s=120)\n")  # fmt: skip
    with held_by_another_process(FILE_HOLDER, loc.path):
        proc = subprocess.Popen([sys.executable, "-c", probe, str(loc.path)], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        helper_pid = int(proc.stdout.readline())
        time.sleep(0.5)  # the helper has the entry and retries the busy store
        assert not _gone(helper_pid)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _gone(helper_pid):
            time.sleep(0.02)
        assert _gone(helper_pid)
    assert [p.name for p in loc.spool_dir.iterdir() if p.is_dir()] != []
    assert flush(loc).committed != []  # the killed collector's run, committed once
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'killed'") == [(1,)]


def test_ctrl_c_in_the_collector_stops_the_helper_s_commit(loc: StoreLocation):
    """SIGINT to the collector alone (not its process group) still ends the helper's
    commit at once; the run waits in the spool, as after an interrupted in-process one."""
    import subprocess
    import sys
    import time

    from store.commit import flush
    from tests.helpers import ROOT

    write_spool(host_bundle(), loc.spool_dir)
    flush(loc)
    probe = ("import sys\nfrom store.commit_helper import CommitHelper\n"
             "from store.bundle import write_spool\nfrom store.location import resolve\n"
             "from tests.store.bundles import host_bundle\n"
             "loc = resolve(sys.argv[1]); h = CommitHelper.start(loc)\n"
             "entry = write_spool(host_bundle(host='interrupted'), loc.spool_dir)\n"
             "print(h.pid, flush=True)\n"
             "try:\n    h.commit(entry, timeout_s=120)\n"
             "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n")  # fmt: skip
    with held_by_another_process(FILE_HOLDER, loc.path):
        proc = subprocess.Popen([sys.executable, "-c", probe, str(loc.path)], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        helper_pid = int(proc.stdout.readline())
        time.sleep(0.5)  # the helper has the entry and retries the busy store
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        assert out.strip() == "interrupted" and _gone(helper_pid)
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'interrupted'") == [(0,)]
    assert flush(loc).committed != []  # nothing lost: the next flush commits it
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'interrupted'") == [(1,)]
