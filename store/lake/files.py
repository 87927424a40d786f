"""Is a lake's data path usable from this host? Reachable, writable, and holding every data
file the catalog names (``doctor``'s data-path check, for a shared folder or a bucket).

Writing is tried with one small Parquet object per host, ``<data path>stepscope-doctor/<host>
.parquet``, overwritten by each check: DuckDB has no statement that deletes an object, and a
fixed name keeps the probes to one per host. DuckLake never reads it (the catalog does not
name it).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import duckdb

from store import migrate
from store.errors import StoreError
from store.lake import catalog as lake
from store.location import StoreLocation, redact
from store.sql import string_literal


@dataclass(frozen=True)
class DataPathCheck:
    level: str  # pass | warn | fail
    detail: str


def _catalog_files(con: duckdb.DuckDBPyConnection) -> set[str]:
    files: set[str] = set()
    for table in migrate.base_tables(con):  # names from the lake's own catalog
        rows = con.execute(f"SELECT data_file, delete_file FROM ducklake_list_files("
                           f"'{lake.ALIAS}', {string_literal(table)})").fetchall()  # fmt: skip
        files.update(f for row in rows for f in row if f)
    return files


def check_data_path(loc: StoreLocation) -> DataPathCheck:
    """Write and read back a probe, then list the data path against the catalog's files."""
    try:
        con = lake.open_private(loc, read_only=True)
    except StoreError as exc:
        return DataPathCheck("fail", str(exc))
    try:
        (path,) = con.execute(f"SELECT data_path FROM ducklake_settings('{lake.ALIAS}')").fetchone()
        where = redact(path)
        if lake.is_remote(path):
            from store.lake import s3

            where = f"{where} at {s3.endpoint().describe()}"
        probe = string_literal(
            f"{path.rstrip('/')}/stepscope-doctor/{socket.gethostname()}.parquet"
        )
        con.execute(f"COPY (SELECT now()::VARCHAR AS checked_at) TO {probe} (FORMAT parquet)")
        con.execute(f"SELECT count(*) FROM read_parquet({probe})").fetchone()
        pattern = string_literal(f"{path.rstrip('/')}/**/*.parquet")
        listed = {r[0] for r in con.execute(f"SELECT file FROM glob({pattern})").fetchall()}
        named = _catalog_files(con)
    except duckdb.Error as exc:
        plain = lake.outage(loc, exc)
        return DataPathCheck("fail", str(plain) if plain else redact(str(exc).splitlines()[0]))
    finally:
        con.close()
    missing = sorted(named - listed)
    if missing:
        return DataPathCheck("fail", f"{where}: {len(missing)} of {len(named)} data file(s) "
                             f"the catalog names are missing, e.g. {redact(missing[0])}")  # fmt: skip
    if not named:
        return DataPathCheck("pass", f"{where}: reachable, writable; no data files yet (small "
                             "runs are kept in the catalog)")  # fmt: skip
    return DataPathCheck("pass", f"{where}: reachable, writable, {len(named)} data file(s) "
                         "present")  # fmt: skip
