"""The turnstile in front of an embedded store: who holds the turn is next, nobody is stuck."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest

from store.connect import connection
from store.errors import StoreBusy
from store.location import resolve
from store.turnstile import take_turn, turn_path
from tests.store.holders import FILE_HOLDER, TURN_HOLDER, held_by_another_process


def test_a_held_turn_makes_the_next_process_wait_then_lets_it_in(tmp_path: Path) -> None:
    store_file = tmp_path / "s.duckdb"
    with held_by_another_process(TURN_HOLDER, store_file), \
            take_turn(store_file, time.monotonic() + 0.2) as held:  # fmt: skip
        assert held is False  # the other process is next, not us
    with take_turn(store_file, time.monotonic() + 0.2) as held:
        assert held is True  # a process that dies gives its turn back
    assert turn_path(store_file).exists()


def test_a_reader_waits_behind_a_held_turn_and_gives_up_with_one_line(tmp_path: Path) -> None:
    store_file = tmp_path / "s.duckdb"
    duckdb.connect(str(store_file)).close()
    # No turn and a file nobody writes: the reader still gets in (the turn only orders).
    with held_by_another_process(TURN_HOLDER, store_file), \
            connection(resolve(store_file), read_only=True, timeout_s=0.3) as con:  # fmt: skip
        assert con.execute("select 42").fetchone() == (42,)


def test_a_sidecar_that_cannot_be_written_still_queues_by_reading(tmp_path: Path) -> None:
    # As on a store shared read-only: opening the sidecar for writing fails (here because
    # it is a folder, which even root cannot open for writing), so it is opened read-only.
    store_file = tmp_path / "s.duckdb"
    duckdb.connect(str(store_file)).close()
    turn_path(store_file).mkdir()
    with take_turn(store_file, time.monotonic() + 0.2) as held:
        assert held is True
    with connection(resolve(store_file), read_only=True, timeout_s=1) as con:
        assert con.execute("select 1").fetchone() == (1,)


def test_a_writer_that_never_leaves_still_ends_in_store_busy(tmp_path: Path) -> None:
    store_file = tmp_path / "s.duckdb"
    with held_by_another_process(FILE_HOLDER, store_file):
        busy = pytest.raises(StoreBusy, match="could not open read-only within 0.5 s")
        with busy, connection(resolve(store_file), read_only=True, timeout_s=0.5):
            pass
        # The turn was given back on the way out: the next process can take it at once.
        with take_turn(store_file, time.monotonic() + 0.05) as held:
            assert held is True


def test_a_sidecar_that_cannot_be_made_never_stops_a_reader(tmp_path: Path) -> None:
    store_file = tmp_path / "s.duckdb"
    duckdb.connect(str(store_file)).close()
    turn_path(store_file).symlink_to(tmp_path / "gone" / "turn")  # points into no folder
    with take_turn(store_file, time.monotonic() + 0.05) as held:
        assert held is False
    with connection(resolve(store_file), read_only=True, timeout_s=1) as con:
        assert con.execute("select 7").fetchone() == (7,)
