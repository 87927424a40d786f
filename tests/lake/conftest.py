"""A real PostgreSQL for the DuckLake tests: Debian's binaries, a temp dir, a free port.

One server per test session; each test gets its own database (a fresh lake catalog) and
its own data path and spool. initdb refuses to run as root, so as root the server runs as
the ``postgres`` system user (Debian's package creates it) in a folder that user owns.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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


@pytest.fixture
def lake(pg: PgServer, tmp_path: Path) -> Iterator[Lake]:
    name = f"lake_{uuid.uuid4().hex[:12]}"
    pg.createdb(name)
    data = tmp_path / "lake-data"
    data.mkdir()
    yield Lake(pg.url(name, f"{data}/"), tmp_path / "spool", data)
    from store.lake import catalog as lake_mod

    lake_mod.reset()


@pytest.fixture
def loc(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> StoreLocation:
    """The store suite's ``loc``, on a DuckLake catalog in PostgreSQL instead of a file."""
    monkeypatch.setenv("STEPSCOPE_SPOOL", str(lake.spool))
    return resolve(lake.url)


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
        return f"s3://{self.server.bucket}/{self.prefix}/"

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


def new_s3_lake(pg: PgServer, server: MotoServer, tmp_path: Path, endpoint: str | None = None
                ) -> S3Lake:  # fmt: skip
    name = f"lake_{uuid.uuid4().hex[:12]}"
    pg.createdb(name)
    prefix = f"{name}/data"
    url = pg.url(name, f"s3://{server.bucket}/{prefix}/")
    return S3Lake(url, tmp_path / "spool", server, prefix, endpoint or server.url)


@pytest.fixture
def s3_lake(pg: PgServer, s3: MotoServer, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Lake]:  # fmt: skip
    """A fresh S3-backed lake, its environment applied to this process too."""
    from store.lake import catalog as lake_mod

    found = new_s3_lake(pg, s3, tmp_path)
    found.apply(monkeypatch)
    yield found
    lake_mod.reset()
