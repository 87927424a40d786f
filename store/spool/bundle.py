"""Run bundles: what a collector hands to the store, and their spool on disk.

A bundle is one run's metadata plus typed tables. It is written to the spool as a folder
(``manifest.json`` + one file per table) under a temporary name and renamed into place, so a
spool entry is either complete or absent, and claimed by its writer before it appears
(store/spool/claim.py). Tables never carry ``run_id``: the commit adds it, so one run id
cannot disagree with itself.

A table file is Parquet, or JSON when every table of the bundle is small and offers its
typed columns (``spool_columns()``, collectors/trace/table.py; a plain table's columns of one
Python type each, store/spool/plain.py): one object of column lists,
written with orjson from numpy, its SQL types in the manifest. That spares a small import
pyarrow's import (~45 ms with pyarrow.parquet, after numpy); up to JSON_MAX_ROWS rows the
JSON costs less than that (benchmarks/spool_format.py). JSON has no NaN or infinity, so a
table holding one stays Parquet.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from store.spool.claim import EntryClaim, claim_entry
from store.spool.plain import plain_columns

BUNDLE_FORMAT = 1  # Parquet tables only
BUNDLE_FORMAT_JSON = 2  # some tables as JSON columns (an older reader sets it aside, unread)
# Up to this many rows a table's JSON costs less than the pyarrow import it spares: 1,707
# kernel rows +5 ms, 10,242 +39 ms, 20,484 +88 ms against 47 ms (benchmarks/spool_format.py).
JSON_MAX_ROWS = 10_000
PARQUET_SLICE_ROWS = 1 << 20  # pyarrow's default row group: a bigger typed table is written in slices
SQL_TYPES = ("BOOLEAN", "INTEGER", "BIGINT", "DOUBLE", "VARCHAR")  # of a JSON table's columns
DEFAULT_COMMIT_TIMEOUT_S = 30.0  # how long a commit retries while the store is busy
CORRUPT_DIR = "corrupt"
_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")  # tables and JSON columns


def new_run_id(verb: str) -> str:
    """Sortable, absolute run id: ``20261130T003412Z-host-3f9a1c2b``."""
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{verb}-{secrets.token_hex(4)}"


def content_run_id(verb: str, digest_source: bytes | str) -> str:
    """Run id derived from content, so re-importing the same files is a no-op."""
    data = digest_source.encode() if isinstance(digest_source, str) else digest_source
    return f"{verb}-{hashlib.sha256(data).hexdigest()[:16]}"


@dataclass
class RunRecord:
    """One row of the ``runs`` table, before the store adds ``committed_at``."""

    run_id: str
    verb: str
    host: str
    started_at: str  # ISO-8601 UTC
    finished_at: str
    status: str = "ok"  # ok | partial | failed
    label: str | None = None
    message: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Bundle:
    """A run and its tables (anything DuckDB can scan: pandas, pyarrow, or dict of lists)."""

    run: RunRecord
    tables: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitResult:
    run_id: str
    inserted: bool  # False when the run was already in the store (a no-op)


@dataclass
class FlushReport:
    committed: list[str]
    already_present: list[str]
    moved_aside: list[tuple[str, str, str]]  # (entry, reason, new path)
    failed: list[tuple[str, str]]  # (entry, reason) - left in the spool
    held_elsewhere: list[str] = field(default_factory=list)  # left to the live process holding it


class CorruptBundle(Exception):
    """A spool entry that cannot be trusted; it is moved aside, never committed."""


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _to_arrow(table: Any) -> Any:
    if hasattr(table, "to_arrow"):  # collectors/trace/table.py
        return table.to_arrow()
    import pyarrow as pa

    if isinstance(table, pa.Table):
        return table
    if isinstance(table, dict):
        return pa.table(table)
    if isinstance(table, list):
        return pa.Table.from_pylist(table)
    return pa.Table.from_pandas(table, preserve_index=False)  # pandas DataFrame


def _write_slices(name: str, table: Any, path: Path) -> int:
    """A big typed table (collectors/trace/table.py) as Parquet, one row group per slice of
    PARQUET_SLICE_ROWS (pyarrow's own row group size): only one slice is Arrow at a time."""
    import pyarrow.parquet as pq

    rows = 0
    writer = None
    try:
        for piece in table.arrow_slices(PARQUET_SLICE_ROWS):
            if writer is None:
                _no_run_id(name, piece.column_names)
                writer = pq.ParquetWriter(path, piece.schema)
            if not piece.schema.equals(writer.schema):  # another rank's part: as the first
                piece = piece.cast(writer.schema)
            writer.write_table(piece)
            rows += piece.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def _no_run_id(name: str, columns: list[str]) -> None:
    if "run_id" in columns:
        raise ValueError(f"bundle table {name} must not carry run_id; the commit adds it")


def _json_columns(table: Any) -> tuple[bytes, list[list[str]], int] | None:
    """The JSON file, ``[[column, SQL type], ...]`` and row count of a small table that
    offers its typed columns (or a plain table of plain types: store/spool/plain.py); None
    when it is too big or cannot give them exactly (it is spooled as Parquet)."""
    if hasattr(table, "spool_columns"):
        columns = table.spool_columns() if len(table) <= JSON_MAX_ROWS else None
    else:
        columns = plain_columns(table, JSON_MAX_ROWS)
    if columns is None:
        return None
    import orjson

    types = [[name, sql_type] for name, (sql_type, _) in columns.items()]
    if not _valid_columns(types):  # what read_manifest would refuse (run_id: Parquet's check)
        return None
    values = {name: v for name, (_, v) in columns.items()}
    rows = len(next(iter(values.values())))
    return orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY), types, rows


def write_spool(bundle: Bundle, spool_dir: Path) -> Path:
    """Write ``bundle`` atomically into ``spool_dir``; return the entry's folder, unclaimed
    (a collector keeps its claim: ``spool_claimed``)."""
    with spool_claimed(bundle, spool_dir) as claim:
        return claim.entry


def spool_claimed(bundle: Bundle, spool_dir: Path) -> EntryClaim:
    """Write ``bundle`` atomically into ``spool_dir`` and hold the entry's claim
    (store/spool/claim.py), taken before the entry appears, so no other process's flush
    reads it while this one commits it. The caller releases the claim."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    final = spool_dir / bundle.run.run_id
    while True:
        # the same run already waits (a re-import): commit that one
        if final.exists() and (claim := claim_entry(final, wait=True)) is not None:
            return claim
        tmp = spool_dir / f".tmp-{bundle.run.run_id}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        claim = claim_entry(tmp, wait=True)
        assert claim is not None  # our pid is alive: no flush takes our temporary folder
        try:
            _write_tables(bundle, tmp)
            os.rename(tmp, final)
        except BaseException as exc:
            claim.release()
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError) and final.exists():
                continue  # another process spooled the same run meanwhile: commit that one
            raise
        _fsync_dir(spool_dir)
        claim.entry = final
        return claim


def _write_tables(bundle: Bundle, folder: Path) -> None:
    """The table files and ``manifest.json`` of an entry, each fsynced."""
    tables = {}
    for name in bundle.tables:
        if not _TABLE_NAME.match(name):
            raise ValueError(f"bad bundle table name {name!r}")
    # JSON only when no table needs Parquet: once pyarrow is imported, Parquet is cheaper
    as_json = {name: _json_columns(table) for name, table in bundle.tables.items()}
    if not all(as_json.values()):
        as_json = {}
    for name, table in bundle.tables.items():
        if as_json:
            data, columns, rows = as_json[name]
            path = folder / f"{name}.json"
            path.write_bytes(data)
            tables[name] = {"file": path.name, "rows": rows, "columns": columns}
        elif hasattr(table, "arrow_slices") and len(table) > PARQUET_SLICE_ROWS:
            path = folder / f"{name}.parquet"
            tables[name] = {"file": path.name, "rows": _write_slices(name, table, path)}
        else:
            import pyarrow.parquet as pq

            arrow = _to_arrow(table)
            _no_run_id(name, arrow.column_names)
            path = folder / f"{name}.parquet"
            pq.write_table(arrow, path)
            tables[name] = {"file": path.name, "rows": arrow.num_rows}
        tables[name]["sha256"] = _sha256(path)
    json_tables = any("columns" in t for t in tables.values())
    manifest = {"format": BUNDLE_FORMAT_JSON if json_tables else BUNDLE_FORMAT,
                "run": asdict(bundle.run), "tables": tables}  # fmt: skip
    manifest_path = folder / "manifest.json"
    manifest_path.write_text(json.dumps(manifest, indent=1, default=str))
    for path in folder.iterdir():
        with path.open("rb") as f:
            os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_manifest(entry: Path) -> dict[str, Any]:
    """Load and verify a spool entry; raise CorruptBundle with the reason if it is bad."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
    except FileNotFoundError:
        raise CorruptBundle("manifest.json is missing") from None
    except (OSError, ValueError) as exc:
        raise CorruptBundle(f"manifest.json is unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in (BUNDLE_FORMAT,
                                                                         BUNDLE_FORMAT_JSON):
        raise CorruptBundle("manifest.json has an unknown format")
    run = manifest.get("run")
    required = ("run_id", "verb", "host", "started_at", "finished_at", "status")
    if not isinstance(run, dict) or any(not run.get(k) for k in required):
        raise CorruptBundle("manifest.json lacks run fields")
    if run["run_id"] != entry.name:
        raise CorruptBundle(f"run id {run['run_id']!r} does not match the folder name")
    tables = manifest.get("tables")
    if not isinstance(tables, dict):
        raise CorruptBundle("manifest.json lacks its table list")
    for name, info in tables.items():
        if not _TABLE_NAME.match(str(name)) or not isinstance(info, dict):
            raise CorruptBundle(f"table entry {name!r} is malformed")
        path = entry / str(info.get("file", ""))
        if path.parent != entry or not path.is_file():
            raise CorruptBundle(f"table file for {name} is missing")
        if _sha256(path) != info.get("sha256"):
            raise CorruptBundle(f"table file for {name} does not match its checksum")
        if path.suffix == ".json" and not _valid_columns(info.get("columns")):
            raise CorruptBundle(f"table {name}: its JSON file's column list is malformed")
        if path.suffix not in (".json", ".parquet"):
            raise CorruptBundle(f"table file for {name} is neither Parquet nor JSON")
    return manifest


def _valid_columns(columns: Any) -> bool:
    """``[[name, SQL type], ...]`` that the commit may write into its SQL (store/commit.py)."""
    return (isinstance(columns, list) and bool(columns)
            and all(isinstance(c, list) and len(c) == 2 and isinstance(c[0], str)
                    and _TABLE_NAME.match(c[0]) and c[0] != "run_id" and c[1] in SQL_TYPES
                    for c in columns))  # fmt: skip


def pending_entries(spool_dir: Path) -> list[Path]:
    """Complete spool entries, oldest first (run ids sort by time)."""
    if not spool_dir.is_dir():
        return []
    return sorted(p for p in spool_dir.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != CORRUPT_DIR)


def abandoned_temp_entries(spool_dir: Path) -> list[Path]:
    """Half-written entries whose writer process is gone (killed mid-spool)."""
    def writer_gone(entry: Path) -> bool:
        pid = entry.name.rsplit("-", 1)[-1]
        return not pid.isdigit() or not Path(f"/proc/{pid}").exists()

    return [p for p in spool_dir.glob(".tmp-*") if writer_gone(p)]


def move_aside(entry: Path, spool_dir: Path) -> Path:
    """Move a bad entry to ``spool/corrupt/`` so it is kept for a human but never committed."""
    target_dir = spool_dir / CORRUPT_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = target_dir / f"{entry.name.lstrip('.')}-{stamp}"
    os.rename(entry, target)
    return target
