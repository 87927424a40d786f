"""A long-running reader (the dashboard's process) keeps reading a lake that ``compact``
rewrote under it: DuckLake 1.5.5's per-instance metadata goes stale when another process
flushes inlined rows and merges files, so store/lake/catalog.py attaches afresh when it sees a
compaction in the catalog's snapshots (found by benchmarks/scale/fleet.py)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.scale.generate import build_lake
from benchmarks.scale.pages import links
from store import reader
from store.lake import catalog as lake_mod
from store.location import StoreLocation, resolve
from tests.helpers import run_cli
from tests.lake.conftest import Lake, PgServer


@pytest.fixture(scope="module")
def built(pg: PgServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The scale generator's lake (every kind of run the pages read), built once for the
    module: its catalog database (nothing holds it open) and its data folder."""
    name = f"lake_{uuid.uuid4().hex[:12]}"
    data = tmp_path_factory.mktemp("built") / "lake-data"
    data.mkdir()
    pg.createdb(name)
    build_lake(pg.url(name, f"{data}/"), runs=11, kernel_rows=40_960, rank_steps=16,
               memory_limit="1GB", threads=2, hosts=50)  # fmt: skip
    return name, data


@pytest.fixture
def scale_lake(pg: PgServer, built: tuple[str, Path], tmp_path: Path) -> Iterator[Lake]:
    """This test's own copy of the built lake (its catalog and its data files)."""
    name, data = f"lake_{uuid.uuid4().hex[:12]}", tmp_path / "lake-data"
    shutil.copytree(built[1], data)
    pg.copy_lake(built[0], name, f"{data}/")
    yield Lake(pg.url(name, f"{data}/"), tmp_path / "spool", data)
    lake_mod.reset()


@pytest.mark.parametrize("keep_days", ["7", "0"])
def test_pages_queries_after_a_compact_by_another_process(scale_lake: Lake, tmp_path: Path,
                                                          keep_days: str) -> None:  # fmt: skip
    lake = scale_lake
    before = links(lake.url)  # this process's cached lake instance reads every kind of run
    res = run_cli(tmp_path / "unused.duckdb", "compact", "--store", lake.url, "--keep-days",
                  keep_days, **lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    assert "flush inlined rows to Parquet: 0 item(s)" not in res.stderr  # it rewrote things
    reader.clear_cache()
    assert links(lake.url) == before


def test_reset_leaves_a_reader_in_another_session_reading(scale_lake: Lake) -> None:
    """reset() runs when one session sees a compaction or an outage; a cursor another
    session holds on the dropped instance still finishes its reads."""
    loc = resolve(scale_lake.url)
    other_session = lake_mod.open_lake(loc, read_only=True)
    runs = other_session.execute("SELECT count(*) FROM runs").fetchone()[0]
    lake_mod.reset(loc)
    assert other_session.execute("SELECT count(*) FROM runs").fetchone()[0] == runs
    other_session.close()
    fresh = lake_mod.open_lake(loc, read_only=True)  # the next open attaches afresh
    assert fresh.execute("SELECT count(*) FROM runs").fetchone()[0] == runs
    fresh.close()


@pytest.mark.new_store  # build_lake creates the lake in the empty catalog
def test_each_thread_reads_through_one_cursor_until_reset_or_an_error(lake: Lake,
                                                                       loc: StoreLocation) -> None:  # fmt: skip
    """The dashboard's reads on a lake: a thread keeps one cursor (no USE per query), another
    thread has its own, reset() (a compaction, an outage) and a failed read each give the
    next read a fresh cursor, and the reads go on."""
    import threading

    import duckdb

    from store.lake import catalog as lake_mod

    build_lake(lake.url, runs=2, kernel_rows=4_096, rank_steps=4, memory_limit="1GB",
               threads=2, hosts=2)  # fmt: skip
    runs = reader.query_df(loc, "SELECT count(*) AS n FROM runs")["n"].iloc[0]
    first = lake_mod.read_cursor(loc)
    assert lake_mod.read_cursor(loc) is first
    elsewhere: list = []
    thread = threading.Thread(target=lambda: elsewhere.append(lake_mod.read_cursor(loc)))
    thread.start()
    thread.join()
    assert elsewhere[0] is not first
    lake_mod.reset(loc)
    second = lake_mod.read_cursor(loc)
    assert second is not first
    with pytest.raises(duckdb.Error):
        reader.query_df(loc, "SELECT * FROM no_such_table")
    assert lake_mod.read_cursor(loc) is not second
    reader.clear_cache()
    assert reader.query_df(loc, "SELECT count(*) AS n FROM runs")["n"].iloc[0] == runs
