"""A lake whose data files live in a real S3 server (moto, tests/lake/s3_server.py) with its
catalog in a real PostgreSQL: collectors commit, 8 hosts at once, pages read, migrate, compact,
and credentials come from where the AWS SDKs look for them - never from the URL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from store.connect import connection
from store.errors import StoreMissing
from store.location import resolve
from tests.helpers import FIXTURES, ROOT, run_cli
from tests.lake.conftest import S3Lake

TRACE = FIXTURES / "traces" / "tracelens" / "vllm_mi300x_decode_fullgraph_bs32.json.gz"


def lake_rows(url: str, sql: str, params: list | None = None) -> list[tuple]:
    with connection(resolve(url), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def test_trace_import_writes_parquet_to_the_bucket(migrated_s3_lake: S3Lake,
                                                   tmp_path: Path) -> None:  # fmt: skip
    res = run_cli(tmp_path / "unused.duckdb", "trace", str(TRACE), "--store",
                  migrated_s3_lake.url, "--json", **migrated_s3_lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    run_id = res.json["run_id"]
    keys = migrated_s3_lake.server.keys(migrated_s3_lake.prefix)
    assert any(k.endswith(".parquet") and "/trace_kernels/" in k for k in keys), keys
    # Opened by its URL alone (no data path): the catalog names the s3:// path.
    bare = migrated_s3_lake.url.partition(";")[0]
    (n,) = lake_rows(bare, "SELECT count(*) FROM trace_kernels WHERE run_id = ?", [run_id])[0]
    assert n == 434  # the trace's GPU events (collectors/trace counts them in its log line)
    assert not any(migrated_s3_lake.spool.iterdir())


def test_eight_hosts_commit_at_once(s3_lake: S3Lake, tmp_path: Path) -> None:
    """8 writer processes, each posing as its own host, commit into one new S3 lake (they
    also race to create its catalog); every committed run is there once, rows complete."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **s3_lake.env()}
    logs = [tmp_path / f"{i}.txt" for i in range(8)]
    writers = [
        subprocess.Popen([sys.executable, "-m", "tests.lake.lake_writer", s3_lake.url, "12",
                          str(log)], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        for log in logs
    ]  # fmt: skip
    for w in writers:
        _out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err[-3000:]
    committed: dict[str, int] = {}
    for log in logs:
        lines = [line.split() for line in log.read_text().splitlines()]
        assert lines, f"writer {log.stem} committed nothing"
        committed.update({run_id: int(gpus) for run_id, gpus in lines})
    stored = dict(lake_rows(s3_lake.url, "SELECT run_id, count(*) FROM runs GROUP BY run_id"))
    gpus = dict(lake_rows(s3_lake.url, "SELECT run_id, count(*) FROM host_gpus GROUP BY run_id"))
    hosts = {h for (h,) in lake_rows(s3_lake.url, "SELECT DISTINCT host FROM runs")}
    assert set(committed) <= set(stored) and all(n == 1 for n in stored.values())
    assert gpus == committed
    assert hosts == {f"w{i}" for i in range(8)}
    # The larger runs (24 GPU rows, over DuckLake's inlining limit) are Parquet in the bucket.
    assert [k for k in s3_lake.server.keys(s3_lake.prefix) if "/host_gpus/" in k]


def test_compact_merges_the_buckets_files_and_keeps_every_row(migrated_s3_lake: S3Lake,
                                                              tmp_path: Path) -> None:  # fmt: skip
    from store.commit import commit_entry
    from store.spool.bundle import write_spool
    from tests.store.bundles import host_bundle

    loc = resolve(migrated_s3_lake.url)
    for i in range(6):
        commit_entry(loc, write_spool(host_bundle(f"h{i}", gpus=24), loc.spool_dir))

    def state() -> tuple:
        url = migrated_s3_lake.url
        rows = lake_rows(url, "SELECT count(*), sum(gpu_index), count(DISTINCT run_id) "
                         "FROM host_gpus")[0]  # fmt: skip
        files = lake_rows(url, "SELECT count(*) FROM ducklake_list_files('lake', "
                          "'host_gpus')")[0][0]  # fmt: skip
        keys = migrated_s3_lake.server.keys(migrated_s3_lake.prefix)
        return rows, files, len([k for k in keys if "/host_gpus/" in k])

    rows_before, files_before, objects_before = state()
    assert files_before == objects_before == 6
    res = run_cli(tmp_path / "unused.duckdb", "compact", "--store", migrated_s3_lake.url,
                  "--keep-days", "0", "--json", **migrated_s3_lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    rows_after, files_after, objects_after = state()
    assert rows_after == rows_before == (6 * 24, 6 * 276, 6)
    assert files_after == 1 and objects_after == 1  # merged, and the old objects deleted


# --- credentials: where the AWS SDKs look, never the URL ------------------------------------


@pytest.mark.parametrize(
    "data_path",
    ["s3://AKIAEXAMPLE:wJalrXUtnFEMI@stepscope-lake/x/",
     "s3://stepscope-lake/x/?s3_access_key_id=AKIAEXAMPLE&s3_secret_access_key=wJalrXUtnFEMI"],
)  # fmt: skip
def test_credentials_in_the_url_are_refused_and_never_printed(
    s3_lake: S3Lake, tmp_path: Path, data_path: str
) -> None:
    url = f"{s3_lake.url.partition(';')[0]} password=pgsecret;data_path={data_path}"
    for verb in (["host"], ["doctor"], ["flush"]):
        res = run_cli(tmp_path / "unused.duckdb", *verb, "--store", url, **s3_lake.env())
        out = res.stdout + res.stderr
        assert "wJalrXUtnFEMI" not in out and "pgsecret" not in out, out
        assert "Traceback" not in out
        if verb == ["host"]:
            assert res.code == 1 and "credentials in the URL are refused" in res.stderr
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    with pytest.raises(StoreMissing):  # refused before anything was created
        lake_rows(s3_lake.url, "SELECT 1")
    assert not s3_lake.server.keys(s3_lake.prefix)


def _commit_with(s3_lake: S3Lake, tmp_path: Path, trace: Path = TRACE, **env: str):  # noqa: ANN202
    return run_cli(tmp_path / "unused.duckdb", "trace", str(trace), "--store", s3_lake.url,
                   "--json", **s3_lake.env(AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="", **env))  # fmt: skip


def test_credentials_from_an_aws_profile(migrated_s3_lake: S3Lake, tmp_path: Path) -> None:
    """No AWS_* keys: ~/.aws-style files and AWS_PROFILE, read by the AWS SDK's credential
    chain (DuckDB's aws extension, from its pinned wheel)."""
    creds, config = tmp_path / "credentials", tmp_path / "config"
    creds.write_text(f"[default]\naws_access_key_id = AKIAWRONGDEFAULT\naws_secret_access_key = "
                     f"nope\n\n[lake]\naws_access_key_id = {migrated_s3_lake.server.key_id}\n"
                     f"aws_secret_access_key = {migrated_s3_lake.server.secret}\n")  # fmt: skip
    config.write_text("[profile lake]\nregion = us-east-1\n"
                      f"endpoint_url = {migrated_s3_lake.server.url}\n")  # fmt: skip
    res = _commit_with(migrated_s3_lake, tmp_path, AWS_SHARED_CREDENTIALS_FILE=str(creds),
                       AWS_CONFIG_FILE=str(config), AWS_PROFILE="lake", AWS_ENDPOINT_URL="")  # fmt: skip
    assert res.code == 0, res.stderr
    assert lake_rows(migrated_s3_lake.url, "SELECT count(*) FROM trace_kernels") == [(434,)]
    # Without AWS_PROFILE the default profile's key is used, and the server refuses it:
    # the profile really chose the key.
    other = TRACE.with_name("vllm_mi300x_prefilldecode_piecewise.json.gz")
    wrong = _commit_with(migrated_s3_lake, tmp_path, other,
                         AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_CONFIG_FILE=str(config),
                         AWS_ENDPOINT_URL=migrated_s3_lake.server.url)  # fmt: skip
    assert wrong.code == 75, wrong.stderr
    assert "InvalidAccessKeyId" in wrong.stderr and "Traceback" not in wrong.stderr


def test_credentials_from_a_duckdb_secret(migrated_s3_lake: S3Lake, tmp_path: Path) -> None:
    """A persistent DuckDB secret scoped to the bucket (in ~/.duckdb/stored_secrets)."""
    import duckdb

    from store.lake import catalog as lake

    home = tmp_path / "home"
    home.mkdir()
    ext = str(lake.extension_dir())
    con = duckdb.connect(config={"secret_directory": str(home / ".duckdb" / "stored_secrets"),
                                 "extension_directory": ext, "autoload_known_extensions": "false",
                                 "autoinstall_known_extensions": "false"})  # fmt: skip
    lake._load(con, "httpfs")
    server = migrated_s3_lake.server
    con.execute(
        "CREATE PERSISTENT SECRET lake_bucket (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, "
        "URL_STYLE 'path', USE_SSL false, REGION 'us-east-1', SCOPE ?)".replace("?", "{}").format(
            *(f"'{v}'" for v in (server.key_id, server.secret, f"127.0.0.1:{server.port}",
                                 f"s3://{server.bucket}"))
        )
    )  # fmt: skip
    con.close()
    res = _commit_with(migrated_s3_lake, tmp_path, HOME=str(home), AWS_ENDPOINT_URL="",
                       STEPSCOPE_DUCKDB_EXTENSION_DIR=ext)  # fmt: skip
    assert res.code == 0, res.stderr
    assert lake_rows(migrated_s3_lake.url, "SELECT count(*) FROM trace_kernels") == [(434,)]


def test_no_credentials_anywhere_is_one_line_and_the_run_is_kept(
    migrated_s3_lake: S3Lake, tmp_path: Path
) -> None:
    res = _commit_with(migrated_s3_lake, tmp_path, HOME=str(tmp_path))
    assert res.code == 1, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "no S3 credentials for s3://" in line and "kept in the spool" in line, res.stderr
    assert "Traceback" not in res.stderr
    (kept,) = migrated_s3_lake.spool.iterdir()
    assert kept.name.startswith("trace-") and str(kept) in line


def test_doctor_checks_the_bucket(migrated_s3_lake: S3Lake, tmp_path: Path) -> None:
    unused, url, server = tmp_path / "unused.duckdb", migrated_s3_lake.url, migrated_s3_lake.server
    assert run_cli(unused, "trace", str(TRACE), "--store", url, **migrated_s3_lake.env()).code == 0
    ok = run_cli(unused, "doctor", "--store", url, **migrated_s3_lake.env())
    line = next(x for x in ok.stdout.splitlines() if " data-path " in f" {x} ")
    assert line.startswith("PASS") and "writable" in line and "data file(s) present" in line, line
    bad = run_cli(unused, "doctor", "--store", url,
                  **migrated_s3_lake.env(AWS_SECRET_ACCESS_KEY="wrong"))  # fmt: skip
    line = next(x for x in bad.stdout.splitlines() if " data-path " in f" {x} ")
    assert bad.code == 1 and line.startswith("FAIL") and "SignatureDoesNotMatch" in line, line
    server.client().delete_object(Bucket=server.bucket,
                                  Key=next(k for k in server.keys(migrated_s3_lake.prefix)
                                           if k.endswith(".parquet")))  # fmt: skip
    gone = run_cli(unused, "doctor", "--store", url, **migrated_s3_lake.env())
    line = next(x for x in gone.stdout.splitlines() if " data-path " in f" {x} ")
    assert gone.code == 1 and line.startswith("FAIL") and "missing" in line, line
