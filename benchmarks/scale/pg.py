"""A PostgreSQL for the DuckLake scale store, kept under one folder between runs.

Same recipe as the lake tests' fixture (tests/lake/conftest.py, whose helpers it imports):
Debian's binaries, trust auth on 127.0.0.1, a free port; as root the server runs as the
``postgres`` user. Unlike the fixture, the cluster survives ``stop`` so the benchmark can
build the lake once and measure it later: ``start(DIR)`` reuses ``DIR/pg`` when present.

    python -m benchmarks.scale.pg start DIR   # prints the lake URL
    python -m benchmarks.scale.pg stop DIR
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.lake.conftest import PG_BIN, PgServer, _as_server_user, _free_port

DB = "scale"


def _run(cmd: list[str], timeout: float = 120) -> None:
    subprocess.run(_as_server_user(cmd), check=True, capture_output=True, timeout=timeout)


def start(root: Path) -> PgServer:
    """Start (creating on first use) the cluster in ``root/pg``; the catalog db is ``scale``."""
    if not (PG_BIN / "initdb").exists():
        raise SystemExit(f"PostgreSQL binaries not found in {PG_BIN}: apt-get install postgresql")
    root = root.absolute()
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    sock, data = root / "sock", root / "pg"
    fresh = not data.exists()
    sock.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(root, user="postgres")
        shutil.chown(sock, user="postgres")
    if fresh:
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
              "--no-sync", "-E", "UTF8"])  # fmt: skip
    port = _free_port()
    options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c max_connections=200"
    _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "pg.log"), "-w", "-t", "60",
          "-o", options, "start"])  # fmt: skip
    server = PgServer("127.0.0.1", port)
    if fresh:
        server.createdb(DB)
    (root / "port").write_text(str(port))
    return server


def lake_url(server: PgServer, root: Path) -> str:
    return server.url(DB, f"{(root.absolute() / 'data')}/")


def stop(root: Path) -> None:
    data = root.absolute() / "pg"
    if data.exists():
        subprocess.run(_as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast",
                                        "-w", "stop"]), capture_output=True, timeout=60)  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    if argv[0] == "start":
        print(lake_url(start(root), root))
    else:
        stop(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
