"""Overview flags runs stuck in the spool (store busy or unreachable when collected): the
next view after two runs were kept says so with the command that commits them, and the view
after ``flush`` no longer does. Through AppTest (each view a new session, as a reload)."""

from __future__ import annotations

from pathlib import Path

from store.location import resolve
from store.spool.bundle import write_spool
from tests.helpers import run_cli
from tests.pages import apptest
from tests.store.bundles import host_bundle


def overview(store: Path) -> str:
    with apptest.store_env(store):
        at = apptest.open_page("pages/overview.py")
    assert not at.exception, at.exception[0].value
    return apptest.page_text(at)


def test_overview_warns_about_a_growing_spool(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0
    first = overview(store)
    assert "**1** host report" in first and "waiting in the spool" not in first
    # Two runs the store did not take (as after exit 75): the next view says so.
    for _ in range(2):
        write_spool(host_bundle(), resolve(store).spool_dir)
    kept = overview(store)
    assert "2 run(s) are waiting in the spool" in kept
    assert "python -m collectors flush" in kept
    assert run_cli(store, "flush").code == 0
    after = overview(store)
    assert "hosts report" in after  # this machine and the bundles' host and "waiting in the spool" not in after
