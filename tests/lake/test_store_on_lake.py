"""The store suite (tests/store/test_store.py) again, on DuckLake with a PostgreSQL catalog.

Every test that takes ``loc`` runs here with ``loc`` a fresh lake (tests/lake/conftest.py);
tests about the embedded file itself are replaced by lake equivalents below.
"""

from __future__ import annotations

import pytest

from store import migrate, queries
from store.bundle import write_spool
from store.commit import commit_entry
from store.connect import connection
from store.errors import StoreError
from store.location import StoreLocation, lake_catalog, resolve
from store.reader import clear_cache, data_version, query_df
from tests.lake.conftest import Lake
from tests.store import test_store as suite
from tests.store.bundles import host_bundle
from tests.store.test_store import *  # noqa: F403  (the same tests, with the lake `loc`)

# Embedded-file specifics (a DuckDB file on disk); the lake versions follow.
del test_writer_upgrades_an_older_store  # noqa: F821
del test_resolve_precedence  # noqa: F821  (no `loc`: already run by tests/store)
del test_a_commit_releases_the_store_whether_it_succeeds_or_fails  # noqa: F821  (a file lock)


def test_suite_is_really_imported() -> None:
    names = [n for n in vars(suite) if n.startswith("test_")]
    assert len([n for n in names if n in globals()]) >= len(names) - 3


def test_lake_url_syntax_and_data_path_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "ducklake:postgres:dbname=x host=db password=s3cret;data_path=/shared/lake/"
    monkeypatch.setenv("STEPSCOPE_LAKE_DATA_PATH", "/from/env/")
    loc = resolve(url)
    assert loc.kind == "ducklake" and loc.data_path == "/shared/lake/"
    assert lake_catalog(url) == "postgres:dbname=x host=db password=s3cret"
    assert "s3cret" not in loc.describe()
    assert resolve(url, data_path="s3://b/p/").data_path == "s3://b/p/"
    assert resolve("ducklake:postgres:dbname=x").data_path == "/from/env/"


def test_migrations_and_information_schema_on_the_lake(loc: StoreLocation) -> None:
    commit_entry(loc, write_spool(host_bundle(gpus=1), loc.spool_dir))
    with connection(loc, read_only=True) as con:
        assert con.execute("SELECT current_database(), current_schema()").fetchone() == (
            "lake",
            "main",
        )
        assert migrate.store_version(con) == migrate.code_version()
        views = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'VIEW' "
                "AND table_catalog = current_database() AND table_schema = current_schema()"
            ).fetchall()
        }
    assert {"v_runs", "v_freshness", "v_hosts"} <= views


def test_writer_upgrades_an_older_lake(loc: StoreLocation) -> None:
    first = migrate.migrations()[0]
    with connection(loc, read_only=False) as con:
        con.execute(
            "CREATE TABLE stepscope_schema (version INTEGER NOT NULL, name VARCHAR NOT NULL, "
            "applied_at TIMESTAMP WITH TIME ZONE NOT NULL)"
        )
        con.execute(first.sql)
        con.execute(
            "INSERT INTO stepscope_schema VALUES (?, ?, now())", [first.version, first.name]
        )
    clear_cache()
    if migrate.code_version() > first.version:
        with pytest.raises(StoreError, match="older than this Stepscope"):
            query_df(loc, "SELECT 1")
    commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
    clear_cache()
    assert len(query_df(loc, "SELECT run_id FROM runs")) == 1


def test_data_version_is_the_catalog_snapshot(loc: StoreLocation) -> None:
    commit_entry(loc, write_spool(host_bundle("a"), loc.spool_dir))
    v1 = data_version(loc)
    assert v1.startswith("snapshot:") and data_version(loc) == v1
    queries.hosts(loc)
    assert data_version(loc) == v1
    commit_entry(loc, write_spool(host_bundle("b"), loc.spool_dir))
    assert data_version(loc) != v1


def test_new_lake_without_data_path_says_how_to_give_one(lake: Lake) -> None:
    bare = resolve(lake.url.partition(";")[0], data_path=None)
    if bare.data_path:  # STEPSCOPE_LAKE_DATA_PATH set in the environment
        pytest.skip("STEPSCOPE_LAKE_DATA_PATH is set")
    with pytest.raises(StoreError, match="needs a data path"):
        commit_entry(bare, write_spool(host_bundle(), lake.spool))


def test_large_table_goes_to_parquet_in_the_data_path(loc: StoreLocation, lake: Lake) -> None:
    """Beyond DuckLake's inlining limit rows land as Parquet files under the data path."""
    bundle = host_bundle(gpus=64)
    commit_entry(loc, write_spool(bundle, loc.spool_dir))
    assert list(lake.data.rglob("*.parquet"))
    rows = query_df(
        loc, "SELECT count(*) AS n FROM host_gpus WHERE run_id = ?", [bundle.run.run_id]
    )
    assert int(rows["n"].iloc[0]) == 64


def test_s3_settings_become_a_duckdb_secret(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """No object storage is reachable here: this checks the secret, not a real bucket."""
    import duckdb

    from store import lake as lake_mod

    env = {"AWS_ACCESS_KEY_ID": "AKIATEST", "AWS_SECRET_ACCESS_KEY": "it's-secret",
           "AWS_DEFAULT_REGION": "eu-west-1", "STEPSCOPE_S3_ENDPOINT": "minio.lan:9000",
           "STEPSCOPE_S3_URL_STYLE": "path", "STEPSCOPE_S3_USE_SSL": "false"}  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert lake_mod.is_remote("s3://bucket/lake/") and not lake_mod.is_remote("/shared/lake/")
    con = duckdb.connect(config={"autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false",
                                 "extension_directory": str(lake_mod.extension_dir())})  # fmt: skip
    try:
        lake_mod._load(con, "httpfs")
        lake_mod._s3_secret(con)
        (secret,) = con.execute(
            "SELECT secret_string FROM duckdb_secrets() WHERE name = 'stepscope_s3'"
        ).fetchone()
    finally:
        con.close()
    fields = dict(part.split("=", 1) for part in secret.split(";"))
    assert fields["type"] == "s3" and fields["key_id"] == "AKIATEST"
    assert fields["endpoint"] == "minio.lan:9000" and fields["url_style"] == "path"
    assert fields["region"] == "eu-west-1" and fields["use_ssl"] == "false"
    assert "it's-secret" not in secret  # DuckDB redacts it
