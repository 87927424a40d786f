"""A real PostgreSQL for the DuckLake tests: Debian's binaries, a temp dir, a free port.

One server per test session; each test gets its own database and its own data path and
spool. That database is empty (``lake``: the test's first writer creates the lake, as a
new site's first collector does) or a copy of a lake created and migrated once per session
(``migrated_lake``: creating a lake and applying every migration costs a few CPU-seconds of
DuckLake catalog writes, most of a short test). initdb refuses to run as root, so as root
the server runs as the ``postgres`` system user (Debian's package creates it) in a folder
that user owns.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from store.location import StoreLocation, resolve
from tests.lake.s3_server import REGION, MotoServer, free_port


def _pg_bin() -> Path:
    """Debian/Ubuntu install each major version under /usr/lib/postgresql/N/bin."""
    if os.environ.get("STEPSCOPE_PG_BIN"):
        return Path(os.environ["STEPSCOPE_PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parts[-3])
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


@dataclass(frozen=True)
class PgServer:
    host: str
    port: int
    user: str = "postgres"
    data: Path | None = None  # the cluster's folder and server options, for stop/start
    options: str = ""
    template: list[str] = field(default_factory=list, compare=False)  # built on first use

    def _ctl(self, *args: str) -> None:
        assert self.data is not None
        subprocess.run(
            _as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                             *args]),
            check=True, capture_output=True, timeout=90,
        )  # fmt: skip

    def stop(self) -> None:
        """A crash: every connection is cut at once (``-m immediate``)."""
        self._ctl("-m", "immediate", "stop")

    def start(self) -> None:
        """Back on the same port; returns once it accepts connections (after recovery)."""
        assert self.data is not None
        self._ctl("-l", str(self.data.parent / "log"), "-o", self.options, "start")

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, dbname: str, data_path: Path | str | None = None) -> str:
        url = (
            f"ducklake:postgres:dbname={dbname} host={self.host} port={self.port} user={self.user}"
        )
        return f"{url};data_path={data_path}" if data_path else url

    def createdb(self, name: str) -> None:
        subprocess.run(
            [str(PG_BIN / "createdb"), "-h", self.host, "-p", str(self.port), "-U", self.user,
             name],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip

    def psql(self, dbname: str, sql: str) -> str:
        """One statement through psql; what it printed (unaligned, tuples only)."""
        return subprocess.run(
            [str(PG_BIN / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h",
             self.host, "-p", str(self.port), "-U", self.user, "-d", dbname, "-c", sql],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    def create_migrated_lake(self, name: str, data_path: str) -> None:
        """Database ``name``: a lake with ``data_path``, created and migrated to this code's
        schema, no runs. A copy (CREATE DATABASE ... TEMPLATE, ~0.1 s) of one such lake made
        once per server, its data path then set to ``data_path``. DuckLake keeps the data path
        only in ``ducklake_metadata`` (key ``data_path``) and writes every schema's and table's
        path relative to it (ducklake.select/docs/stable/duckdb/usage/paths), and the template
        has no data files: the copy is the lake a writer would have created with that path."""
        self.copy_lake(self._migrated_template(), name, data_path)

    def copy_lake(self, source: str, name: str, data_path: str) -> None:
        """Database ``name``: a copy of the lake catalog in database ``source`` (which nothing
        may hold open), its data path set to ``data_path``, where the caller has copied the
        source's data files if it has any (DuckLake names them relative to the data path)."""
        self.psql("postgres", f"CREATE DATABASE {name} TEMPLATE {source}")
        literal = "'" + data_path.replace("'", "''") + "'"
        updated = self.psql(name, f"UPDATE ducklake_metadata SET value = {literal} "
                                  "WHERE key = 'data_path' AND scope IS NULL RETURNING value")  # fmt: skip
        assert updated == data_path, updated

    def _migrated_template(self) -> str:
        if not self.template:
            from store import migrate
            from store.lake import catalog as lake_mod

            name = "lake_migrated_template"
            self.createdb(name)
            with tempfile.TemporaryDirectory(prefix="stepscope-template-") as data:
                # an uncached instance: closed here, so nothing holds the template database
                # open (CREATE DATABASE ... TEMPLATE refuses a database in use)
                con = lake_mod.open_private(resolve(self.url(name, f"{data}/")), read_only=False)
                try:
                    migrate.upgrade(con)
                finally:
                    con.close()
            self.template.append(name)
        return self.template[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL binaries not found in {PG_BIN}: apt-get install postgresql")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as non-root")
    root = Path(tempfile.mkdtemp(prefix="stepscope-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, user="postgres")
    data, port = root / "data", _free_port()
    subprocess.run(
        _as_server_user([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                         "--no-sync", "-E", "UTF8"]),
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    )
    subprocess.run(
        _as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w",
                         "-t", "60", "-o", options, "start"]),
        check=True, capture_output=True, timeout=90,
    )  # fmt: skip
    try:
        yield PgServer("127.0.0.1", port, data=data, options=options)
    finally:
        from store.lake import catalog as lake

        lake.reset()  # drop cached instances (their catalog connections go with them) first
        subprocess.run(
            _as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                             "stop"]),
            capture_output=True, timeout=60,
        )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class Lake:
    """One fresh lake: its URL (with data path), spool dir and data dir."""

    url: str
    spool: Path
    data: Path

    def env(self) -> dict[str, str]:
        return {"STEPSCOPE_SPOOL": str(self.spool)}


def _new_lake(pg: PgServer, tmp_path: Path, migrated: bool) -> Iterator[Lake]:
    name = f"lake_{uuid.uuid4().hex[:12]}"
    data = tmp_path / "lake-data"
    data.mkdir()
    if migrated:
        pg.create_migrated_lake(name, f"{data}/")
    else:
        pg.createdb(name)
    yield Lake(pg.url(name, f"{data}/"), tmp_path / "spool", data)
    from store.lake import catalog as lake_mod

    lake_mod.reset()


@pytest.fixture
def lake(pg: PgServer, tmp_path: Path) -> Iterator[Lake]:
    """An empty catalog database: the test's first writer creates the lake."""
    yield from _new_lake(pg, tmp_path, migrated=False)


@pytest.fixture
def migrated_lake(pg: PgServer, tmp_path: Path) -> Iterator[Lake]:
    """A lake already created and migrated to this code's schema, with no runs."""
    yield from _new_lake(pg, tmp_path, migrated=True)


@pytest.fixture
def loc(request: pytest.FixtureRequest, pg: PgServer,
        monkeypatch: pytest.MonkeyPatch) -> StoreLocation:  # fmt: skip
    """The store suite's ``loc``, on a DuckLake catalog in PostgreSQL instead of a file: a
    migrated lake, or for a test marked ``new_store`` (it starts from no store at all) an
    empty database. A test that also takes the Lake gets the same one. (``pg`` is named so
    that tests/conftest.py marks every test using ``loc`` here ``service``.)"""
    which, other = ("lake", "migrated_lake")
    if request.node.get_closest_marker("new_store") is None:
        which, other = other, which
    if other in request.fixturenames:
        raise pytest.UsageError(f"{request.node.nodeid}: `loc` is on `{which}` here, not `{other}`")
    found: Lake = request.getfixturevalue(which)
    monkeypatch.setenv("STEPSCOPE_SPOOL", str(found.spool))
    return resolve(found.url)


# --- S3: a real moto server (tests/lake/s3_server.py) for lakes with s3:// data paths ------


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """One moto S3 server for the session, with IAM auth, a user, its key and a bucket."""
    pytest.importorskip("moto", reason="moto[server] is in requirements-dev.txt")
    server = MotoServer(free_port(), tmp_path_factory.mktemp("moto") / "moto.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class S3Lake:
    """A fresh lake whose data files go to ``s3://bucket/prefix/`` on a moto server."""

    url: str
    spool: Path
    server: MotoServer
    prefix: str
    endpoint: str  # what AWS_ENDPOINT_URL says: the server or a proxy in front of it

    @property
    def data_path(self) -> str:
        return self.url.partition(";data_path=")[2]

    def env(self, **overrides: str) -> dict[str, str]:
        """Environment for a process using this lake: the AWS SDKs' standard variables and
        nothing from the developer's own ~/.aws (``apply`` removes the variables in
        ``UNSET`` from this process, which the CLI's processes inherit)."""
        env = {
            "STEPSCOPE_SPOOL": str(self.spool),
            "AWS_ACCESS_KEY_ID": self.server.key_id,
            "AWS_SECRET_ACCESS_KEY": self.server.secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_CONFIG_FILE": str(self.spool.parent / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.spool.parent / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",  # never ask 169.254.169.254
        }
        return {**env, **overrides}

    def apply(self, monkeypatch: pytest.MonkeyPatch, **overrides: str) -> None:
        """The same environment for this test process (in-process store calls)."""
        for key in UNSET:
            monkeypatch.delenv(key, raising=False)
        for key, value in self.env(**overrides).items():
            monkeypatch.setenv(key, value)


UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION",
         "STEPSCOPE_S3_ENDPOINT", "STEPSCOPE_S3_URL_STYLE", "STEPSCOPE_S3_USE_SSL",
         "STEPSCOPE_S3_CREDENTIAL_CHAIN", "STEPSCOPE_LAKE_DATA_PATH")  # fmt: skip


def new_s3_lake(pg: PgServer, server: MotoServer, tmp_path: Path, endpoint: str | None = None,
                migrated: bool = False, bucket: str | None = None) -> S3Lake:  # fmt: skip
    """An empty catalog database for a lake in ``bucket`` (default: ``server``'s), or with
    ``migrated`` a lake there already created and migrated (PgServer.create_migrated_lake)."""
    name = f"lake_{uuid.uuid4().hex[:12]}"
    prefix = f"{name}/data"
    data_path = f"s3://{bucket or server.bucket}/{prefix}/"
    if migrated:
        pg.create_migrated_lake(name, data_path)
    else:
        pg.createdb(name)
    return S3Lake(pg.url(name, data_path), tmp_path / "spool", server, prefix,
                  endpoint or server.url)  # fmt: skip


def _s3_lake(pg: PgServer, s3: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             migrated: bool) -> Iterator[S3Lake]:  # fmt: skip
    from store.lake import catalog as lake_mod

    found = new_s3_lake(pg, s3, tmp_path, migrated=migrated)
    found.apply(monkeypatch)
    yield found
    lake_mod.reset()


@pytest.fixture
def s3_lake(pg: PgServer, s3: MotoServer, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Lake]:  # fmt: skip
    """A fresh S3-backed lake (an empty catalog database), its environment applied to this
    process too."""
    yield from _s3_lake(pg, s3, tmp_path, monkeypatch, migrated=False)


@pytest.fixture
def migrated_s3_lake(pg: PgServer, s3: MotoServer, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Lake]:  # fmt: skip
    """An S3-backed lake already created and migrated, no runs; its environment applied."""
    yield from _s3_lake(pg, s3, tmp_path, monkeypatch, migrated=True)
