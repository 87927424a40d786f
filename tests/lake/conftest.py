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
        yield PgServer("127.0.0.1", port)
    finally:
        from store import lake

        lake.reset()  # close cached catalog connections before the server goes
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
    from store import lake as lake_mod

    lake_mod.reset()


@pytest.fixture
def loc(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> StoreLocation:
    """The store suite's ``loc``, on a DuckLake catalog in PostgreSQL instead of a file."""
    monkeypatch.setenv("STEPSCOPE_SPOOL", str(lake.spool))
    return resolve(lake.url)
