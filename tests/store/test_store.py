"""The store's rules: migrations, atomic spool, whole-run idempotent commit, readers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from store import migrate
from store.commit import commit_entry, flush
from store.connect import connection
from store.errors import StoreError, StoreMissing
from store.location import StoreLocation, resolve
from store.queries import overview as queries
from store.reader import clear_cache, data_version, query_df
from store.spool import bundle as bundle_mod
from store.spool.bundle import CorruptBundle, pending_entries, read_manifest, write_spool
from tests.store.bundles import host_bundle


def count(loc: StoreLocation, sql: str, params: list | None = None) -> int:
    with connection(loc, read_only=True) as con:
        return con.execute(sql, params or []).fetchone()[0]


def test_resolve_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STEPSCOPE_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve(None).path == tmp_path / "xdg" / "stepscope" / "stepscope.duckdb"
    monkeypatch.setenv("STEPSCOPE_STORE", str(tmp_path / "env.duckdb"))
    assert resolve(None).path == tmp_path / "env.duckdb"
    assert resolve(tmp_path / "flag.duckdb").path == tmp_path / "flag.duckdb"
    lake = resolve("ducklake:postgres:dbname=x password=secret")
    assert lake.kind == "ducklake" and "secret" not in lake.describe()


@pytest.mark.new_store
def test_commit_applies_migrations_and_inserts_whole_run(loc: StoreLocation) -> None:
    bundle = host_bundle(gpus=2)
    entry = write_spool(bundle, loc.spool_dir)
    result = commit_entry(loc, entry)
    assert result.inserted and not entry.exists()
    with connection(loc, read_only=True) as con:
        assert migrate.store_version(con) == migrate.code_version()
    assert count(loc, "SELECT count(*) FROM runs WHERE run_id = ?", [bundle.run.run_id]) == 1
    assert count(loc, "SELECT count(*) FROM host_gpus WHERE run_id = ?", [bundle.run.run_id]) == 2


def _schema_objects(loc: StoreLocation) -> set[tuple[str, str]]:
    with connection(loc, read_only=True) as con:
        return set(con.execute(
            "SELECT 'table', table_name FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT 'view', view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall())  # fmt: skip


def test_a_commit_adds_rows_and_never_schema_objects(loc: StoreLocation) -> None:
    """The commit's own helper view (the run row) lives and dies with its connection."""
    with connection(loc, read_only=False) as con:
        migrate.upgrade(con)
    migrated = _schema_objects(loc)
    assert ("view", "v_runs") in migrated and ("table", "runs") in migrated
    for gpus in (1, 2):
        commit_entry(loc, write_spool(host_bundle(gpus=gpus), loc.spool_dir))
        assert _schema_objects(loc) == migrated
    assert count(loc, "SELECT count(*) FROM runs") == 2


def test_commit_into_a_folder_whose_name_has_quotes(tmp_path: Path) -> None:
    """The commit names each spooled file in its SQL as a literal (binding would import
    pandas): a quote in the store's folder is doubled, not read as the literal's end."""
    loc = resolve(tmp_path / "o'brien's runs" / "store.duckdb")
    bundle = host_bundle(gpus=2)
    result = commit_entry(loc, write_spool(bundle, loc.spool_dir))
    assert result.inserted
    assert count(loc, "SELECT count(*) FROM host_gpus WHERE run_id = ?", [bundle.run.run_id]) == 2


def test_recommitting_a_run_is_a_noop(loc: StoreLocation) -> None:
    bundle = host_bundle(gpus=3)
    commit_entry(loc, write_spool(bundle, loc.spool_dir))
    again = commit_entry(loc, write_spool(bundle, loc.spool_dir))
    assert not again.inserted
    assert count(loc, "SELECT count(*) FROM runs") == 1
    assert count(loc, "SELECT count(*) FROM host_gpus") == 3


def test_spool_entry_is_complete_or_absent(loc: StoreLocation) -> None:
    entry = write_spool(host_bundle(gpus=1), loc.spool_dir)
    assert [p.name for p in loc.spool_dir.iterdir()] == [entry.name]  # no temp folder left
    manifest = read_manifest(entry)
    assert manifest["tables"]["host_gpus"]["rows"] == 1


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda e: (e / "manifest.json").write_text("{not json"), "unreadable"),
        (lambda e: (e / "manifest.json").unlink(), "missing"),
        (lambda e: next(e.glob("host_gpus.*")).write_bytes(b"PAR1garbage"), "checksum"),
        (lambda e: next(e.glob("host_gpus.*")).unlink(), "missing"),
    ],
)
@pytest.mark.parametrize("table_format", ["json", "parquet"])
def test_corrupt_spool_entry_is_moved_aside_never_committed(loc, damage, reason, table_format,
                                                            monkeypatch) -> None:  # fmt: skip
    if table_format == "parquet":  # a table too big for JSON
        monkeypatch.setattr(bundle_mod, "JSON_MAX_ROWS", 0)
    bundle = host_bundle(gpus=1)
    entry = write_spool(bundle, loc.spool_dir)
    damage(entry)
    with pytest.raises(CorruptBundle, match=reason):
        read_manifest(entry)
    good = write_spool(host_bundle(), loc.spool_dir)
    report = flush(loc)
    assert report.committed == [good.name]
    assert [m[0] for m in report.moved_aside] == [entry.name]
    assert reason in report.moved_aside[0][1]
    assert Path(report.moved_aside[0][2]).is_dir()  # kept for a human to look at
    assert pending_entries(loc.spool_dir) == []
    assert count(loc, "SELECT count(*) FROM runs WHERE run_id = ?", [bundle.run.run_id]) == 0


def test_bundle_for_unknown_table_stays_in_spool(loc: StoreLocation) -> None:
    bundle = host_bundle()
    bundle.tables["not_a_table"] = {"x": [1]}
    entry = write_spool(bundle, loc.spool_dir)
    report = flush(loc)
    assert report.failed and "not_a_table" in report.failed[0][1]
    assert entry.exists()
    assert count(loc, "SELECT count(*) FROM runs") == 0


def test_failed_insert_rolls_back_the_whole_run(loc: StoreLocation) -> None:
    bundle = host_bundle(gpus=1)
    bundle.tables["host_gpus"]["gpu_index"] = ["not-an-int"]  # type error inside the txn
    entry = write_spool(bundle, loc.spool_dir)
    with pytest.raises(duckdb.Error):
        commit_entry(loc, entry)
    assert count(loc, "SELECT count(*) FROM runs") == 0
    assert count(loc, "SELECT count(*) FROM host_gpus") == 0
    assert entry.exists()


_WRITE_AT_ONCE = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE OR REPLACE TABLE other_writer AS SELECT 1 AS x")
print(con.execute("SELECT count(*) FROM runs").fetchone()[0])
"""


def _writes_at_once(loc: StoreLocation) -> list[str]:
    """What another process prints after opening the store read-write with no retry."""
    # loc.file, not str(loc.path): on a lake that is "None", a new store in the current folder
    other = subprocess.run([sys.executable, "-c", _WRITE_AT_ONCE, str(loc.file)],
                           capture_output=True, text=True)  # fmt: skip
    assert other.returncode == 0, other.stderr
    return other.stdout.split()


def test_a_commit_releases_the_store_whether_it_succeeds_or_fails(loc: StoreLocation) -> None:
    """After each commit, failed or not, the connection is closed and the file lock gone,
    so another process opens the store read-write at once, with no retry."""
    assert commit_entry(loc, write_spool(host_bundle(gpus=1), loc.spool_dir)).inserted
    assert _writes_at_once(loc) == ["1"]
    bad = host_bundle(gpus=1)
    bad.tables["host_gpus"]["gpu_index"] = ["not-an-int"]
    with pytest.raises(duckdb.Error):
        commit_entry(loc, write_spool(bad, loc.spool_dir))
    assert _writes_at_once(loc) == ["1"]


def test_a_writer_left_inside_a_transaction_rolls_it_back_and_releases_the_store(
    loc: StoreLocation,
) -> None:
    """An error between BEGIN and COMMIT that nobody rolled back: leaving the connection
    ends the transaction (nothing of it is kept) and releases the store."""
    with pytest.raises(RuntimeError, match="a bug"), \
            connection(loc, read_only=False, timeout_s=10) as con:  # fmt: skip
        migrate.upgrade(con)
        con.execute("BEGIN TRANSACTION")
        con.execute("INSERT INTO runs BY NAME SELECT 'half' AS run_id, 'host' AS verb, "
                    "'h' AS host, now() AS started_at, now() AS finished_at, 'ok' AS status, "
                    "now() AS committed_at")  # fmt: skip
        raise RuntimeError("a bug")
    assert _writes_at_once(loc) == ["0"]
    assert commit_entry(loc, write_spool(host_bundle(gpus=1), loc.spool_dir)).inserted


@pytest.mark.new_store
def test_reader_sees_new_commits_and_caches_on_data_version(loc: StoreLocation) -> None:
    clear_cache()
    with pytest.raises(StoreMissing):
        query_df(loc, "SELECT 1")
    commit_entry(loc, write_spool(host_bundle("a"), loc.spool_dir))
    v1 = data_version(loc)
    assert queries.host_names(loc) == ["a"]
    assert data_version(loc) == v1  # reading changes nothing
    commit_entry(loc, write_spool(host_bundle("b"), loc.spool_dir))
    assert data_version(loc) != v1
    assert sorted(queries.host_names(loc)) == ["a", "b"]
    assert len(queries.recent_runs(loc, host="b")) == 1
    fresh = queries.freshness(loc)
    assert set(fresh["host"]) == {"a", "b"} and set(fresh["verb"]) == {"host"}


def test_hostile_filter_values_are_bound_not_interpolated(loc: StoreLocation) -> None:
    commit_entry(loc, write_spool(host_bundle("a"), loc.spool_dir))
    hostile = "a' OR '1'='1"
    assert queries.recent_runs(loc, host=hostile).empty
    assert queries.freshness(loc, host="'; DROP TABLE runs; --").empty
    assert count(loc, "SELECT count(*) FROM runs") == 1


def test_reader_refuses_newer_schema_plainly(loc: StoreLocation) -> None:
    commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
    with connection(loc, read_only=False) as con:
        con.execute("INSERT INTO stepscope_schema VALUES (9999, 'future', now())")
    clear_cache()
    with pytest.raises(StoreError, match="newer than this Stepscope"):
        query_df(loc, "SELECT 1")
    with pytest.raises(StoreError, match="newer than this Stepscope"):
        commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))


def test_writer_upgrades_an_older_store(loc: StoreLocation) -> None:
    """A store made by the first migration only is upgraded by the next commit."""
    first = migrate.migrations()[0]
    assert loc.path is not None
    loc.path.parent.mkdir(parents=True)
    con = duckdb.connect(str(loc.path))
    con.execute(
        "CREATE TABLE stepscope_schema (version INTEGER NOT NULL, name VARCHAR NOT NULL, "
        "applied_at TIMESTAMP WITH TIME ZONE NOT NULL)"
    )
    con.execute(first.sql)
    con.execute("INSERT INTO stepscope_schema VALUES (?, ?, now())", [first.version, first.name])
    con.close()
    clear_cache()
    if migrate.code_version() > first.version:
        with pytest.raises(StoreError, match="older than this Stepscope"):
            query_df(loc, "SELECT 1")
    commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
    clear_cache()
    assert len(query_df(loc, "SELECT * FROM runs")) == 1


def test_manifest_is_plain_json(loc: StoreLocation) -> None:
    entry = write_spool(host_bundle(label="x"), loc.spool_dir)
    data = json.loads((entry / "manifest.json").read_text())
    assert data["run"]["label"] == "x" and data["run"]["verb"] == "host"
