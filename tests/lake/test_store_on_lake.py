"""The store suite (tests/store/test_store.py) again, on DuckLake with a PostgreSQL catalog.

Every test that takes ``loc`` runs here with ``loc`` a lake of its own (tests/lake/conftest.py):
a migrated one with no runs, or an empty catalog database for a test marked ``new_store``;
tests about the embedded file itself are replaced by lake equivalents below.
"""

from __future__ import annotations

import pytest

from store import migrate
from store.commit import commit_entry
from store.connect import connection
from store.errors import StoreError
from store.location import StoreLocation, lake_catalog, resolve
from store.queries import overview as queries
from store.reader import clear_cache, data_version, query_df
from store.spool.bundle import write_spool
from tests.lake.conftest import Lake
from tests.store import test_store as suite
from tests.store.bundles import host_bundle
from tests.store.test_store import *  # noqa: F403  (the same tests, with the lake `loc`)

# Embedded-file specifics (a DuckDB file on disk); the lake versions follow.
del test_writer_upgrades_an_older_store  # noqa: F821
del test_resolve_precedence  # noqa: F821  (no `loc`: already run by tests/store)
del test_a_commit_releases_the_store_whether_it_succeeds_or_fails  # noqa: F821  (a file lock)
# (a file lock too; pop: the test is new in tests/store and may not be there yet)
globals().pop("test_a_writer_left_inside_a_transaction_rolls_it_back_and_releases_the_store", None)


def test_suite_is_really_imported() -> None:
    names = [n for n in vars(suite) if n.startswith("test_")]
    assert len([n for n in names if n in globals()]) >= len(names) - 4


def test_lake_url_syntax_and_data_path_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "ducklake:postgres:dbname=x host=db password=s3cret;data_path=/shared/lake/"
    monkeypatch.setenv("STEPSCOPE_LAKE_DATA_PATH", "/from/env/")
    loc = resolve(url)
    assert loc.kind == "ducklake" and loc.data_path == "/shared/lake/"
    assert lake_catalog(url) == "postgres:dbname=x host=db password=s3cret"
    assert "s3cret" not in loc.describe()
    assert resolve(url, data_path="s3://b/p/").data_path == "s3://b/p/"
    assert resolve("ducklake:postgres:dbname=x").data_path == "/from/env/"


@pytest.mark.new_store
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


@pytest.mark.new_store
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


def test_the_suites_file_writer_refuses_a_lake(loc: StoreLocation, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The release tests' other writer opens ``loc.file``: on a lake that is a clear error.
    It opened ``str(loc.path)``, i.e. ``"None"``, a new DuckDB file in the current folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="has no file"):
        suite._writes_at_once(loc)
    assert not (tmp_path / "None").exists()


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


def test_large_table_goes_to_parquet_in_the_data_path(loc: StoreLocation,
                                                      migrated_lake: Lake) -> None:
    """Beyond DuckLake's inlining limit rows land as Parquet files under the data path."""
    bundle = host_bundle(gpus=64)
    commit_entry(loc, write_spool(bundle, loc.spool_dir))
    assert list(migrated_lake.data.rglob("*.parquet"))
    rows = query_df(
        loc, "SELECT count(*) AS n FROM host_gpus WHERE run_id = ?", [bundle.run.run_id]
    )
    assert int(rows["n"].iloc[0]) == 64


def test_s3_settings_become_a_duckdb_secret(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The secret's fields from the settings (the S3 tests use them against a real server)."""
    import duckdb

    from store.lake import catalog as lake_mod
    from store.lake import s3

    env = {"AWS_ACCESS_KEY_ID": "AKIATEST", "AWS_SECRET_ACCESS_KEY": "it's-secret",
           "AWS_DEFAULT_REGION": "eu-west-1", "STEPSCOPE_S3_ENDPOINT": "minio.lan:9000",
           "STEPSCOPE_S3_URL_STYLE": "path", "STEPSCOPE_S3_USE_SSL": "false"}  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert lake_mod.is_remote("s3://bucket/lake/") and not lake_mod.is_remote("/shared/lake/")
    con = duckdb.connect(config={"autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false",
                                 "secret_directory": str(tmp_path / "secrets"),
                                 "extension_directory": str(lake_mod.extension_dir())})  # fmt: skip
    try:
        lake_mod._load(con, "httpfs")
        s3.create_secret(con, "s3://bucket/lake/", lake_mod._load)
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


ENDPOINT_VARS = ("STEPSCOPE_S3_ENDPOINT", "STEPSCOPE_S3_URL_STYLE", "STEPSCOPE_S3_USE_SSL",
                 "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
                 "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION")  # fmt: skip


@pytest.mark.parametrize("env, host, ssl, style", [
    ({}, None, True, "vhost"),
    ({"AWS_ENDPOINT_URL": "http://minio.lan:9000"}, "minio.lan:9000", False, "path"),
    ({"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "https://s3.lan"}, "s3.lan",
     True, "path"),
    ({"AWS_ENDPOINT_URL": "http://a:1", "STEPSCOPE_S3_ENDPOINT": "ceph.lan:7480",
      "STEPSCOPE_S3_URL_STYLE": "vhost"}, "ceph.lan:7480", True, "vhost"),
    ({"AWS_PROFILE": "lake"}, "profile.lan:9000", False, "path"),
    ({"AWS_PROFILE": "svc"}, "svc.lan:9000", True, "path"),
    ({"AWS_PROFILE": "lake", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, None, True, "vhost"),
])  # fmt: skip
def test_s3_endpoint_follows_the_aws_sdks(env, host, ssl, style, tmp_path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Precedence of docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html:
    AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's services s3 endpoint_url, its
    endpoint_url; STEPSCOPE_S3_ENDPOINT above them all."""
    from store.lake import s3

    config = tmp_path / "config"
    config.write_text("[profile lake]\nregion = eu-central-1\nendpoint_url = "
                      "http://profile.lan:9000\n\n[profile svc]\nendpoint_url = http://x:1\n"
                      "services = mine\n\n[services mine]\ns3 =\n  endpoint_url = "
                      "https://svc.lan:9000\n")  # fmt: skip
    for key in ENDPOINT_VARS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ep = s3.endpoint()
    assert (ep.host, ep.use_ssl, ep.url_style) == (host, ssl, style)
    if env.get("AWS_PROFILE") == "lake":
        assert ep.region == "eu-central-1"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://user:pw@minio.lan:9000/bucket")
    monkeypatch.delenv("STEPSCOPE_S3_ENDPOINT", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)
    with pytest.raises(StoreError, match="without a path or credentials") as err:
        s3.endpoint()
    assert "pw" not in str(err.value)


def test_redact_hides_every_credential_form() -> None:
    from store.location import redact, refuse_credentials

    url = ("ducklake:postgres:dbname=x host=db password=pg1;data_path=s3://AKIA1:sec1@b/p/"
           "?s3_secret_access_key=sec2&s3_session_token=zq9x&s3_region=eu")  # fmt: skip
    shown = redact(url)
    for secret in ("pg1", "AKIA1", "sec1", "sec2", "zq9x"):
        assert secret not in shown
    assert "s3_region=eu" in shown and "dbname=x" in shown
    refuse_credentials("s3://bucket/lake/")  # a plain path passes
    with pytest.raises(StoreError, match="credentials in the URL are refused"):
        refuse_credentials("s3://AKIA1:sec1@bucket/lake/")
