"""Set a stored run's host: an import filed under ``unknown`` (or under the machine that
imported it, before migration 0015) gets the host that recorded it. One UPDATE of the run's
``runs`` row in one transaction, on an embedded store or a DuckLake alike; the run's other
rows carry no host (the views join it from ``runs``), so nothing else moves. Re-running it
with the same name changes nothing.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

import duckdb

from store import migrate
from store.connect import connection
from store.errors import StoreBusy
from store.location import StoreLocation
from store.retry import retry


@dataclass(frozen=True)
class Relabelled:
    run_id: str
    before: str | None  # None: no such run in the store
    after: str
    changed: bool


def relabel(loc: StoreLocation, run_id: str, host: str, timeout_s: float) -> Relabelled:
    """File ``run_id`` under ``host``; StoreBusy while other writers hold the store."""
    if loc.kind != "ducklake":
        return _once(loc, run_id, host, timeout_s)
    from store.lake.catalog import is_conflict

    return retry(lambda: _once(loc, run_id, host, timeout_s),
                 transient=lambda exc: isinstance(exc, duckdb.Error) and is_conflict(exc),
                 timeout_s=timeout_s, first_delay_s=0.05,
                 give_up=lambda _exc: StoreBusy(f"store {loc.describe()} is busy: the relabel "
                                                f"kept conflicting for {timeout_s:g} s"))  # fmt: skip


def _once(loc: StoreLocation, run_id: str, host: str, timeout_s: float) -> Relabelled:
    with connection(loc, read_only=False, timeout_s=timeout_s) as con:
        migrate.upgrade(con)
        con.execute("BEGIN TRANSACTION")
        try:
            row = con.execute("SELECT host FROM runs WHERE run_id = ?", [run_id]).fetchone()
            if row is None or row[0] == host:
                con.execute("ROLLBACK")
                return Relabelled(run_id, None if row is None else row[0], host, False)
            con.execute("UPDATE runs SET host = ? WHERE run_id = ?", [host, run_id])
            con.execute("COMMIT")
        except duckdb.Error:
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
    return Relabelled(run_id, row[0], host, True)

