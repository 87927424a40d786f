"""What object storage and a catalog can do to a commit, done for real: the S3 server
stopped before a commit and killed during one, the network cut mid-upload (a TCP proxy
over real sockets), a wrong key, a missing bucket, PostgreSQL down at the commit.

Each ends in exit 75 with the run kept in the spool and one line saying why; ``flush``
commits it once the fault is gone; and no reader ever sees part of the run: every table's
row count for the run is zero or complete, before, during and after. A PostgreSQL restart
that is over before the COMMIT is survived: the run commits whole, once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from store.commit import commit_entry
from store.connect import connection
from store.location import resolve
from store.spool.bundle import read_manifest, write_spool
from tests.helpers import run_cli
from tests.lake.conftest import PgServer, S3Lake, new_s3_lake
from tests.lake.s3_server import MotoServer, TcpProxy, free_port
from tests.store.bundles import host_bundle

pytestmark = pytest.mark.slow
BIG_ROWS = 100_000  # ~5 MB of Parquet: an upload long enough to cut in the middle
CUT_AFTER = 2 << 20  # bytes the proxy lets through before the fault


@pytest.fixture(scope="module")
def big_export(tmp_path_factory: pytest.TempPathFactory) -> Big:
    """A real export (``collectors export``) of one run with a large, incompressible table."""
    import json
    import secrets
    import zipfile

    tmp = tmp_path_factory.mktemp("big")
    src = resolve(tmp / "src.duckdb")
    bundle = host_bundle("big-node", gpus=0)
    bundle.tables["host_gpus"] = {
        "gpu_index": list(range(BIG_ROWS)),
        "name": ["NVIDIA H200"] * BIG_ROWS,
        "uuid": [f"GPU-{secrets.token_hex(16)}" for _ in range(BIG_ROWS)],
        "memory_bytes": [141 * 2**30] * BIG_ROWS,
        "pci_bus_id": [f"0000:{i % 256:02x}:{i % 32:02x}.0" for i in range(BIG_ROWS)],
    }
    commit_entry(src, write_spool(bundle, src.spool_dir))
    out = tmp / "big.zip"
    res = run_cli(src.path, "export", bundle.run.run_id, "--out", str(out))
    assert res.code == 0, res.stderr
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    rows = {name: t["rows"] for name, t in manifest["tables"].items()}
    assert rows["host_gpus"] == BIG_ROWS
    return Big(out, bundle.run.run_id, {**rows, "runs": 1}, tmp / "src.duckdb")


@dataclass(frozen=True)
class Big:
    zip: Path
    run_id: str
    rows: dict[str, int]  # per table, ``runs`` included: the whole run
    store: Path  # the embedded store it was exported from (a source for ``migrate``)


def run_counts(url: str, run_id: str) -> dict[str, int]:
    """Rows for ``run_id`` in every table of the lake (what a reader can see of the run)."""
    with connection(resolve(url), read_only=True, timeout_s=30) as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_catalog = current_database() AND table_schema = current_schema() "
            "AND table_name <> 'stepscope_schema'").fetchall()]  # fmt: skip
        # ONE statement for every table: its counts come from one snapshot, as a page's query
        # reads it (one autocommit per table straddled a commit in CI: runs 1, host_gpus 0;
        # an explicit transaction around them crashed the process, 04ea91a).
        counts = " UNION ALL ".join(
            f'SELECT {i}, count(*) FROM "{t}" WHERE run_id = $run' for i, t in enumerate(tables)
        )
        rows = dict(con.execute(counts, {"run": run_id}).fetchall())
        return {t: rows[i] for i, t in enumerate(tables)}


def assert_none_or_all(counts: dict[str, int], want: dict[str, int]) -> bool:
    """True when the run is complete, False when absent; fails on anything in between."""
    seen = {t: n for t, n in counts.items() if n}
    if not seen:
        return False
    assert seen == want, f"a reader saw part of a run: {seen} of {want}"
    return True


class Watcher:
    """A reader polling the run's row counts in every table while the fault happens."""

    def __init__(self, url: str, run_id: str, want: dict[str, int]) -> None:
        self.url, self.run_id, self.want = url, run_id, want
        self.seen: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.seen.append(run_counts(self.url, self.run_id))
            except Exception:  # noqa: BLE001 - the fault may stop reads too; not counted
                continue

    def check(self) -> None:
        self._stop.set()
        self._thread.join(60)
        for counts in self.seen:
            assert_none_or_all(counts, self.want)


def import_big(lake: S3Lake, zip_path: Path, tmp_path: Path, **env: str):  # noqa: ANN201
    return run_cli(tmp_path / "unused.duckdb", "import", str(zip_path), "--store", lake.url,
                   **lake.env(**env))  # fmt: skip


def assert_kept(res, lake: S3Lake, *words: str) -> str:  # noqa: ANN001
    """Exit 75, one error line with ``words``, the run in the spool; returns the run id."""
    assert res.code == 75, res.stderr
    errors = [line for line in res.stderr.splitlines() if "kept in the spool" in line]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    for word in words:
        assert word in errors[0], errors[0]
    (entry,) = [p for p in lake.spool.iterdir() if not p.name.startswith(".")]
    return read_manifest(entry)["run"]["run_id"]


def flush_commits(lake: S3Lake, run_id: str, want: dict[str, int], tmp_path: Path) -> None:
    from store.lake import catalog as lake_mod

    lake_mod.reset()  # this process's reader reconnects with the environment of now
    assert not assert_none_or_all(run_counts(lake.url, run_id), want)  # nothing of it yet
    res = run_cli(tmp_path / "unused.duckdb", "flush", "--store", lake.url, **lake.env())
    assert res.code == 0, res.stderr
    assert f"committed 1 run(s): {run_id}" in res.stderr
    assert assert_none_or_all(run_counts(lake.url, run_id), want)
    assert not [p for p in lake.spool.iterdir() if not p.name.startswith(".")]


@pytest.fixture(scope="module")
def killable_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(free_port(), tmp_path_factory.mktemp("own-moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture
def own_moto(killable_moto: MotoServer) -> MotoServer:
    """A moto server this test may stop, kill and start (it keeps buckets in memory only),
    running when the test begins. One per module: each test that stops it starts it again,
    with a new key, and works under a prefix of its own, so none sees another's objects."""
    if killable_moto.proc is None:
        killable_moto.start()
    return killable_moto


@pytest.fixture
def proxy_lake(pg: PgServer, s3: MotoServer, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[S3Lake, TcpProxy]]:  # fmt: skip
    """A lake on the session's moto whose collectors reach S3 through a cuttable proxy;
    this process (the reader) talks to moto directly."""
    from store.lake import catalog as lake_mod

    proxy = TcpProxy(s3.port)
    proxy.resume()
    found = new_s3_lake(pg, s3, tmp_path, endpoint=f"http://127.0.0.1:{proxy.port}",
                        migrated=True)  # fmt: skip
    found.apply(monkeypatch, AWS_ENDPOINT_URL=s3.url)
    # One run committed before the fault: it must stay whole through everything below. Its
    # few rows are inlined in the catalog (compact's first step writes them to the bucket).
    commit_entry(resolve(found.url), write_spool(host_bundle("before-the-fault", gpus=2),
                                                 found.spool))  # fmt: skip
    lake_mod.reset()  # no writer instance kept in this process: it only reads from here on
    yield found, proxy
    proxy.cut()
    lake_mod.reset()


def test_s3_stopped_before_the_commit(pg: PgServer, own_moto: MotoServer, big_export,
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    lake = new_s3_lake(pg, own_moto, tmp_path, migrated=True)
    lake.apply(monkeypatch)
    own_moto.stop()
    res = import_big(lake, big_export.zip, tmp_path)
    run_id = assert_kept(res, lake, "unreachable", own_moto.url, "flush")
    own_moto.start()  # back, empty, with a new key: flush reads the new environment
    lake.apply(monkeypatch)
    flush_commits(lake, run_id, big_export.rows, tmp_path)


def test_s3_killed_during_the_upload(pg: PgServer, own_moto: MotoServer, big_export,
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    proxy = TcpProxy(own_moto.port)
    proxy.resume()
    lake = new_s3_lake(pg, own_moto, tmp_path, endpoint=f"http://127.0.0.1:{proxy.port}",
                       migrated=True)  # fmt: skip
    lake.apply(monkeypatch)
    killed = threading.Event()
    proxy.on_upload(CUT_AFTER, lambda: (own_moto.stop(kill=True), killed.set()))
    res = import_big(lake, big_export.zip, tmp_path)
    assert killed.is_set(), "the upload finished before the server was killed"
    run_id = assert_kept(res, lake, f"127.0.0.1:{proxy.port}")
    own_moto.start()
    lake.apply(monkeypatch)  # the restarted server's key (the reader's too)
    flush_commits(lake, run_id, big_export.rows, tmp_path)
    proxy.cut()


def test_network_cut_mid_upload(proxy_lake, big_export, tmp_path: Path) -> None:  # noqa: ANN001
    lake, proxy = proxy_lake
    proxy.on_upload(CUT_AFTER, proxy.cut)
    watcher = Watcher(lake.url, big_export.run_id, big_export.rows)
    res = import_big(lake, big_export.zip, tmp_path)
    run_id = assert_kept(res, lake, "unreachable", f"127.0.0.1:{proxy.port}")
    proxy.resume()
    flush_commits(lake, run_id, big_export.rows, tmp_path)
    watcher.check()
    assert len(watcher.seen) > 3  # the reader really read throughout
    with connection(resolve(lake.url), read_only=True) as con:  # the earlier run is whole
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


@pytest.mark.parametrize("env, words", [
    ({"AWS_SECRET_ACCESS_KEY": "wrong"}, ("refused", "SignatureDoesNotMatch")),
    ({"AWS_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}, ("refused", "InvalidAccessKeyId")),
])  # fmt: skip
def test_wrong_key(migrated_s3_lake: S3Lake, big_export, tmp_path: Path, env: dict,
                   words: tuple) -> None:  # fmt: skip
    lake = migrated_s3_lake
    res = import_big(lake, big_export.zip, tmp_path, **env)
    run_id = assert_kept(res, lake, *words)
    assert lake.server.secret not in res.stderr
    flush_commits(lake, run_id, big_export.rows, tmp_path)


def test_missing_bucket(pg: PgServer, s3: MotoServer, big_export, tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    bucket = f"missing-{uuid.uuid4().hex[:12]}"
    lake = new_s3_lake(pg, s3, tmp_path, migrated=True, bucket=bucket)
    lake.apply(monkeypatch)
    res = import_big(lake, big_export.zip, tmp_path)
    run_id = assert_kept(res, lake, f"bucket '{bucket}' does not exist")
    s3.client().create_bucket(Bucket=bucket)
    flush_commits(lake, run_id, big_export.rows, tmp_path)


def test_postgres_down_at_the_commit(proxy_lake, pg: PgServer, big_export,
                                     tmp_path: Path) -> None:  # noqa: ANN001  # fmt: skip
    """The catalog's server crashes while the run's Parquet is uploading and is back only
    after the collector gave up: the transaction the commit began cannot be committed."""
    lake, proxy = proxy_lake
    stopped = threading.Event()
    proxy.on_upload(CUT_AFTER, lambda: (pg.stop(), stopped.set()))
    try:
        res = import_big(lake, big_export.zip, tmp_path)
    finally:
        pg.start()
    assert stopped.is_set()
    run_id = assert_kept(res, lake, "lake catalog", "unreachable")
    flush_commits(lake, run_id, big_export.rows, tmp_path)


def test_postgres_restarted_mid_upload(proxy_lake, pg: PgServer, big_export,
                                       tmp_path: Path) -> None:  # noqa: ANN001  # fmt: skip
    """A restart that is over before the COMMIT: DuckLake writes the catalog only at COMMIT,
    on a new connection, so the run commits whole and once (exit 0)."""
    lake, proxy = proxy_lake
    restarted = threading.Event()
    proxy.on_upload(CUT_AFTER, lambda: (pg.restart(), restarted.set()))
    watcher = Watcher(lake.url, big_export.run_id, big_export.rows)
    res = import_big(lake, big_export.zip, tmp_path)
    assert restarted.is_set()
    assert res.code == 0, res.stderr
    from store.lake import catalog as lake_mod

    lake_mod.reset()
    assert assert_none_or_all(run_counts(lake.url, big_export.run_id), big_export.rows)
    watcher.check()


def test_compact_with_the_bucket_unreachable(proxy_lake, tmp_path: Path) -> None:  # noqa: ANN001
    """compact's first step writes the catalog's inlined rows to Parquet in the bucket."""
    lake, proxy = proxy_lake
    proxy.cut()
    res = run_cli(tmp_path / "unused.duckdb", "compact", "--store", lake.url, "--keep-days", "0",
                  **lake.env())  # fmt: skip
    assert res.code == 75, res.stderr
    (line,) = [x for x in res.stderr.splitlines() if "unreachable" in x]
    assert f"127.0.0.1:{proxy.port}" in line and "Traceback" not in res.stderr
    proxy.resume()
    again = run_cli(tmp_path / "unused.duckdb", "compact", "--store", lake.url, "--keep-days",
                    "0", **lake.env())  # fmt: skip
    assert again.code == 0, again.stderr
    with connection(resolve(lake.url), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


@pytest.mark.parametrize("when", ["before", "during"])
def test_migrate_with_the_bucket_unreachable(proxy_lake, big_export, tmp_path: Path,
                                             when: str) -> None:  # noqa: ANN001  # fmt: skip
    """``migrate --to`` a lake whose bucket is cut before the copy or in the middle of its
    upload: store unavailable (exit 75) in one line naming the endpoint, no reader ever sees
    part of the run, and the same command run again finishes the copy (then is a no-op)."""
    lake, proxy = proxy_lake
    cut = threading.Event()
    if when == "before":
        proxy.cut()
        cut.set()
    else:
        proxy.on_upload(CUT_AFTER, lambda: (proxy.cut(), cut.set()))
    watcher = Watcher(lake.url, big_export.run_id, big_export.rows)
    res = run_cli(big_export.store, "migrate", "--to", lake.url, **lake.env())
    assert cut.is_set(), "the upload finished before the cut"
    assert res.code == 75, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "unreachable" in line and f"127.0.0.1:{proxy.port}" in line, line
    assert "internal error" not in line and "Traceback" not in res.stderr
    proxy.resume()
    from store.lake import catalog as lake_mod

    lake_mod.reset()
    assert not assert_none_or_all(run_counts(lake.url, big_export.run_id), big_export.rows)
    again = run_cli(big_export.store, "migrate", "--to", lake.url, "--json", **lake.env())
    assert again.code == 0, again.stderr
    assert again.json["new_runs"] == 1 and again.json["ok"]
    assert assert_none_or_all(run_counts(lake.url, big_export.run_id), big_export.rows)
    watcher.check()
    once_more = run_cli(big_export.store, "migrate", "--to", lake.url, "--json", **lake.env())
    assert once_more.code == 0 and once_more.json["new_runs"] == 0, once_more.stderr
    with connection(resolve(lake.url), read_only=True) as con:  # the earlier run is whole too
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


def test_migrate_into_a_new_lake_with_s3_stopped(pg: PgServer, own_moto: MotoServer, big_export,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:  # fmt: skip
    """The first ``migrate`` to a lake whose S3 server is down: the catalog may be created,
    no run is in it, and the same command finishes the move once the server is back."""
    lake = new_s3_lake(pg, own_moto, tmp_path)
    lake.apply(monkeypatch)
    own_moto.stop()
    res = run_cli(big_export.store, "migrate", "--to", lake.url, **lake.env())
    assert res.code == 75, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "unreachable" in line and own_moto.url in line and "migrate again" in line, line
    own_moto.start()  # back, empty, with a new key
    lake.apply(monkeypatch)
    again = run_cli(big_export.store, "migrate", "--to", lake.url, "--json", **lake.env())
    assert again.code == 0, again.stderr
    assert again.json["new_runs"] == 1 and again.json["ok"]
    from store.lake import catalog as lake_mod

    lake_mod.reset()
    assert assert_none_or_all(run_counts(lake.url, big_export.run_id), big_export.rows)
