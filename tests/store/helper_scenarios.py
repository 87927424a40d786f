"""Commit-helper scenarios, each run in a fresh interpreter as the CLI runs.

    python -m tests.store.helper_scenarios SCENARIO STORE_FILE

A helper is forked only while no other thread runs (store/commit_helper.py), and a pytest
process may hold threads left by other tests (Playwright's child watcher, for one); so the
tests in test_commit_helper.py run these here and check what they print (one JSON object)
and what they left in the store.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path

from collectors.context import Context
from store.bundle import write_spool
from store.commit_helper import CommitHelper
from store.errors import StoreBusy
from store.location import StoreLocation, resolve
from tests.store.bundles import host_bundle


def reaped(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def context(loc: StoreLocation, commit_timeout: float | None = None) -> Context:
    args = argparse.Namespace(dry_run=False, json=False, commit_timeout=commit_timeout,
                              label=None, host_name=None)  # fmt: skip
    return Context(verb="host", args=args, log=logging.getLogger("stepscope.test"), loc=loc)


def commit_with_backlog(loc: StoreLocation) -> dict:
    helper = CommitHelper.start(loc)  # first, as the CLI does: spooling may start threads
    waiting = write_spool(host_bundle(host="earlier", gpus=1), loc.spool_dir)
    entry = write_spool(host_bundle(host="now", gpus=2), loc.spool_dir)
    result, backlog = helper.commit(entry, timeout_s=10)
    return {"helper": helper.pid, "run_id": result.run_id, "entry": entry.name,
            "inserted": result.inserted, "backlog": backlog.committed, "waiting": waiting.name,
            "left": sorted(p.name for p in loc.spool_dir.iterdir()),
            "reaped": reaped(helper.pid)}  # fmt: skip


def busy(loc: StoreLocation) -> dict:
    helper = CommitHelper.start(loc)
    entry = write_spool(host_bundle(host="busy"), loc.spool_dir)
    try:
        helper.commit(entry, timeout_s=0.5)
    except StoreBusy as exc:
        return {"helper": helper.pid, "raised": str(exc), "entry_kept": entry.is_dir(),
                "reaped": reaped(helper.pid)}  # fmt: skip
    return {"helper": helper.pid, "raised": None}


def nothing_to_commit(loc: StoreLocation) -> dict:
    helper = CommitHelper.start(loc)
    helper.close()
    helper.close()  # twice is harmless: a verb's error path and the CLI's finally both close
    return {"helper": helper.pid, "reaped": reaped(helper.pid)}


def dead_helper(loc: StoreLocation) -> dict:
    ctx = context(loc)
    ctx.start_commit_helper()
    pid = ctx.commit_helper.pid
    os.kill(pid, signal.SIGKILL)
    bundle = host_bundle(host="survivor", gpus=1)
    code = ctx.submit(bundle)
    return {"helper": pid, "code": code, "run_id": bundle.run.run_id,
            "left": sorted(p.name for p in loc.spool_dir.iterdir()), "reaped": reaped(pid)}  # fmt: skip


def busy_through_submit(loc: StoreLocation) -> dict:
    ctx = context(loc, commit_timeout=0.5)
    ctx.start_commit_helper()
    pid = ctx.commit_helper.pid
    bundle = host_bundle(host="second")
    code = ctx.submit(bundle)
    return {"helper": pid, "code": code, "kept": (loc.spool_dir / bundle.run.run_id).is_dir()}


def wait_on_busy_store(loc: StoreLocation) -> dict:
    """Print the helper's pid, then let it retry a store held elsewhere for up to 120 s."""
    helper = CommitHelper.start(loc)
    entry = write_spool(host_bundle(host="waiting"), loc.spool_dir)
    print(helper.pid, flush=True)
    try:
        helper.commit(entry, timeout_s=120)
    except KeyboardInterrupt:
        return {"helper": helper.pid, "interrupted": True}
    return {"helper": helper.pid, "interrupted": False}


def early_job(loc: StoreLocation) -> dict:
    """The early job runs in the helper; its result arrives before the commit's outcome."""
    helper = CommitHelper.start(loc, early=os.getpid)
    ran_in = helper.early_result()
    entry = write_spool(host_bundle(host="after-early"), loc.spool_dir)
    result, _ = helper.commit(entry, timeout_s=10)
    return {"helper": helper.pid, "ran_in": ran_in, "again": helper.early_result(),
            "inserted": result.inserted, "reaped": reaped(helper.pid)}  # fmt: skip


def early_job_raises(loc: StoreLocation) -> dict:
    def broken() -> None:
        raise OSError("no /proc here")

    helper = CommitHelper.start(loc, early=broken)
    result, _ = helper.commit(write_spool(host_bundle(host="x"), loc.spool_dir), timeout_s=10)
    return {"early": helper.early_result(), "inserted": result.inserted}


def environment_from_helper(loc: StoreLocation) -> dict:
    """Context.environment(): the helper's snapshot, a fresh one once the helper is gone."""
    import collectors.context

    collectors.context._environment = lambda: {"taken_in": os.getpid()}
    ctx = context(loc)
    ctx.start_commit_helper()
    helper = ctx.commit_helper.pid
    first = ctx.environment()
    first["vllm"] = "changed by a caller"
    second = ctx.environment()
    bundle = host_bundle(host="with-env")
    bundle.run.env = second
    code = ctx.submit(bundle)
    ctx.start_commit_helper()
    os.kill(ctx.commit_helper.pid, signal.SIGKILL)
    after_death = ctx.environment()
    ctx.close()
    return {"helper": helper, "self": os.getpid(), "first": first["taken_in"],
            "second": second, "code": code, "after_death": after_death["taken_in"]}  # fmt: skip


def helper_that_fails_to_start(loc: StoreLocation) -> dict:
    """A helper whose setup raises exits there: it never runs the caller's code as a copy."""
    import store.commit_helper

    def broken(*_args: object) -> None:
        raise TypeError("broken helper")

    store.commit_helper._serve = broken
    try:
        helper = CommitHelper.start(loc)
    except TypeError:  # as the CLI would catch it, and go on in the child as a second collector
        return {"escaped_into": os.getpid()}
    _, status = os.waitpid(helper.pid, 0)
    return {"helper": helper.pid, "exit": os.waitstatus_to_exitcode(status)}


def after_duckdb_import(loc: StoreLocation) -> dict:
    """No helper once duckdb is imported: its worker thread would not be in the fork."""
    before = CommitHelper.start(loc)
    if before is not None:
        before.close()
    import duckdb

    duckdb.default_connection().execute("SELECT 1").fetchall()
    return {"before": before is not None, "after": CommitHelper.start(loc) is not None}


SCENARIOS = {f.__name__: f for f in (commit_with_backlog, busy, nothing_to_commit, dead_helper,
                                     busy_through_submit, wait_on_busy_store, early_job,
                                     early_job_raises, environment_from_helper,
                                     helper_that_fails_to_start,
                                     after_duckdb_import)}  # fmt: skip


if __name__ == "__main__":
    name, store = sys.argv[1:3]
    print(json.dumps(SCENARIOS[name](resolve(store))))
