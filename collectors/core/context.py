"""What every verb gets: the resolved store, logging, and ``submit`` for its bundle."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass, field
from typing import Any

from collectors.core.errors import EXIT_OK, EXIT_STORE_BUSY
from store.errors import StoreBusy, StoreError
from store.location import StoreLocation, redact
from store.spool.bundle import (
    DEFAULT_COMMIT_TIMEOUT_S,
    Bundle,
    FlushReport,
    RunRecord,
    spool_claimed,
    utc_now_iso,
)

_INTERNAL_ARGS = {"_verb", "verbose", "log_format", "json", "dry_run", "commit_timeout"}
# Arguments that name a store: recorded with any password or key in them hidden, since every
# reader of the store sees a run's arguments.
_STORE_ARGS = {"store", "to", "data_path"}


@dataclass
class Context:
    verb: str
    args: argparse.Namespace
    log: logging.Logger
    loc: StoreLocation
    started_at: str = field(default_factory=utc_now_iso)

    @property
    def commit_timeout(self) -> float:
        value = getattr(self.args, "commit_timeout", None)
        return DEFAULT_COMMIT_TIMEOUT_S if value is None else value

    def host(self, env: dict[str, Any] | None = None) -> str:
        """A run measured on this machine: ``--host``, else the snapshot's hostname."""
        import socket

        named = getattr(self.args, "host_name", None) or (env or {}).get("hostname")
        return named or socket.gethostname()

    def server_run(self, url: str) -> tuple[str, dict[str, Any]]:
        """(host, environment) of a run against the server at ``url`` (collectors/core/
        hosts.py): this machine's snapshot when the server runs here; else the server's
        machine, whose GPUs this one's snapshot does not describe (kept as ``importer``)."""
        from collectors.core.hosts import imported_env, run_host, server_machine

        snapshot = self.environment()
        host = run_host(getattr(self.args, "host_name", None), url=url)
        return host, snapshot if server_machine(url) is None else imported_env(snapshot)

    def import_host(self, from_files: str | None = None) -> str:
        """The host of a run imported from files measured elsewhere: ``--host``, else the
        host the files name, else UNKNOWN_HOST (never this machine: see ``imported_env``)."""
        from collectors.core.hosts import run_host

        return run_host(getattr(self.args, "host_name", None), from_files=from_files)

    def environment(self) -> dict[str, Any]:
        """This host's environment snapshot (collectors/inventory/env.py)."""
        from collectors.inventory import (
            env,  # platform, socket and NVML: only where a snapshot is taken
        )

        return env.snapshot()

    def recorded_args(self) -> dict[str, Any]:
        return {
            k: redact(v) if k in _STORE_ARGS and isinstance(v, str) else v
            for k, v in vars(self.args).items()
            if k not in _INTERNAL_ARGS and v is not None
        }

    def flush_command(self) -> str:
        """The command that commits what waits in the spool (credentials in the URL shown
        as ``***``: the user puts them back, a log never carries them)."""
        return f"python -m collectors flush --store '{self.loc.describe()}'"

    def run_record(
        self, run_id: str, env: dict[str, Any] | None = None, **fields: Any
    ) -> RunRecord:
        """A runs row for this verb with the environment and arguments filled in."""
        env = env if env is not None else self.environment()
        return RunRecord(
            run_id=run_id,
            verb=self.verb,
            host=fields.pop("host", None) or self.host(env),
            started_at=fields.pop("started_at", None) or self.started_at,
            finished_at=fields.pop("finished_at", None) or utc_now_iso(),
            label=fields.pop("label", None) or self.args.label,
            env=env,
            args=self.recorded_args(),
            **fields,
        )

    def emit(self, summary: dict[str, Any]) -> None:
        if self.args.json:
            sys.stdout.write(json.dumps(summary, default=str) + "\n")
            sys.stdout.flush()

    def submit(self, bundle: Bundle, summary: dict[str, Any] | None = None) -> int:
        """Spool the bundle atomically, commit it, then commit anything else pending."""
        summary = {"run_id": bundle.run.run_id, **(summary or {})}
        rows = {name: _row_count(t) for name, t in bundle.tables.items()}
        if self.args.dry_run:
            self.log.info(f"dry run: run {bundle.run.run_id} not committed (rows: {rows})")
            self.emit({**summary, "committed": False, "dry_run": True})
            return EXIT_OK
        # store.commit imports duckdb: only a verb that commits pays for it
        from store.commit import commit_then_flush

        claim = spool_claimed(bundle, self.loc.spool_dir)  # no other flush reads it meanwhile
        # the spool holds the tables now: the commit reads them from there, so their memory
        # (a 10-million-kernel trace's ~0.4 GB) is released before DuckDB takes its own
        bundle.tables.clear()
        entry = claim.entry
        self.log.debug(f"spooled {entry}")
        try:
            result, backlog = commit_then_flush(self.loc, claim, self.commit_timeout)
        except StoreBusy as exc:
            self.log.error(
                f"{exc}; run {bundle.run.run_id} is kept in the spool at {entry}; "
                f"commit it later with: {self.flush_command()}"
            )
            self.emit({**summary, "committed": False, "spooled": str(entry)})
            return EXIT_STORE_BUSY
        except KeyboardInterrupt:
            if entry.exists():  # else it was committed, and the backlog's flush stopped
                self.log.error(f"run {bundle.run.run_id} is kept in the spool at {entry}; commit "
                               f"it with: {self.flush_command()}")
            raise
        except StoreError as exc:
            # Nothing a user collected is lost: the run waits in the spool for a fixed store.
            raise StoreError(
                f"{exc}; run {bundle.run.run_id} is kept in the spool at {entry}"
            ) from None
        if result.inserted:
            self.log.info(f"committed run {result.run_id} to {self.loc.describe()} (rows: {rows})")
        else:
            self.log.info(f"run {result.run_id} was already in the store; nothing changed")
        self._report_backlog(backlog)
        self.emit({**summary, "committed": True})
        return EXIT_OK

    def _report_backlog(self, report: FlushReport | None) -> None:
        """Earlier runs left by a busy store went in too; a still-busy store is not an error."""
        if report is None:
            return
        if report.committed:
            self.log.info(f"also committed {len(report.committed)} earlier spooled run(s)")
        for name, reason, target in report.moved_aside:
            self.log.warning(f"spool entry {name} is corrupt ({reason}); moved to {target}")


def _row_count(table: Any) -> int:
    return len(next(iter(table.values()), [])) if isinstance(table, dict) else len(table)

