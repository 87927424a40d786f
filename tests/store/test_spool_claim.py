"""Spool claims (store/spool/claim.py): a flush leaves an entry another live process holds,
takes it once that process is gone, and never calls a vanished entry corrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from store.commit import commit_entry, flush
from store.location import StoreLocation
from store.spool.bundle import CORRUPT_DIR, pending_entries, spool_claimed, write_spool
from store.spool.claim import EntryHeld, claim_entry
from tests.helpers import ROOT, query
from tests.store.bundles import host_bundle
from tests.store.holders import held_by_another_process

CLAIM_HOLDER = (
    "import sys, time; from pathlib import Path; from store.spool.claim import claim_entry\n"
    "claim = claim_entry(Path(sys.argv[1]), wait=True)\n"
    "print('held' if claim else 'gone', flush=True); time.sleep(600)\n"
)


def _runs(loc: StoreLocation) -> int:
    return query(loc.path, "SELECT count(*) FROM runs")[0][0]


def test_a_flush_leaves_an_entry_another_process_holds_even_half_read(loc: StoreLocation):
    """What a flush would call corrupt (its manifest gone mid-read) is not touched while its
    holder lives: the holder may be committing and removing it at this very moment."""
    commit_entry(loc, write_spool(host_bundle(host="first"), loc.spool_dir))
    entry = write_spool(host_bundle(host="held", gpus=1), loc.spool_dir)
    with held_by_another_process(CLAIM_HOLDER, entry):
        (entry / "manifest.json").unlink()  # as the holder's removal would leave it
        report = flush(loc)
        assert report.held_elsewhere == [entry.name]
        assert report.moved_aside == [] and report.failed == [] and report.committed == []
        assert entry.is_dir() and not (loc.spool_dir / CORRUPT_DIR).exists()
    report = flush(loc)  # nobody holds it now: it really is unreadable
    assert [m[0] for m in report.moved_aside] == [entry.name] and pending_entries(loc.spool_dir) == []


def test_an_entry_whose_holder_was_killed_is_the_next_flush_s(loc: StoreLocation):
    commit_entry(loc, write_spool(host_bundle(host="first"), loc.spool_dir))
    entry = write_spool(host_bundle(host="killed", gpus=1), loc.spool_dir)
    holder = subprocess.Popen([sys.executable, "-c", CLAIM_HOLDER, str(entry)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    assert flush(loc).held_elsewhere == [entry.name]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert flush(loc).committed == [entry.name]
    assert query(loc.path, "SELECT count(*) FROM runs WHERE host = 'killed'") == [(1,)]


def test_a_vanished_entry_is_already_committed_not_corrupt(loc: StoreLocation):
    entry = write_spool(host_bundle(host="gone"), loc.spool_dir)
    claim = claim_entry(entry, wait=False)
    assert claim is not None and claim.present()
    os.rename(entry, entry.with_name("elsewhere"))  # as if its holder had removed it
    assert not claim.present()
    claim.release()
    assert claim_entry(entry, wait=False) is None
    assert claim_entry(entry.with_name("never-was"), wait=True) is None


def test_a_claim_excludes_every_other_holder_and_dies_with_its_release(loc: StoreLocation):
    claim = spool_claimed(host_bundle(host="mine"), loc.spool_dir)
    try:
        assert claim.entry.parent == loc.spool_dir and claim.present()
        with pytest.raises(EntryHeld):
            claim_entry(claim.entry, wait=False)  # another descriptor, even in this process
        assert flush(loc).held_elsewhere == [claim.entry.name]
    finally:
        claim.release()
    assert flush(loc).committed == [claim.entry.name] and _runs(loc) == 1


def test_an_entry_is_claimed_before_it_appears(loc: StoreLocation, monkeypatch):
    """No moment when a spooled entry is visible and unclaimed: its temporary folder is
    claimed first, and the claim follows the rename (observed right after the real one)."""
    seen: list[Path] = []
    real_rename = os.rename

    def rename_then_look(src: str | Path, dst: str | Path) -> None:
        real_rename(src, dst)
        try:
            claim_entry(Path(dst), wait=False)
        except EntryHeld:
            seen.append(Path(dst))

    monkeypatch.setattr(os, "rename", rename_then_look)
    claim = spool_claimed(host_bundle(host="atomic"), loc.spool_dir)
    monkeypatch.undo()
    claim.release()
    assert seen == [claim.entry]
