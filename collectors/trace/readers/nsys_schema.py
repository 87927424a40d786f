"""What an Nsight Systems SQLite export holds, across the eras of its schema.

``nsys export --type sqlite`` writes one table per kind of data. What the reader relies on
(seen in real exports of nsys 2022.2, schema 2.9.1, and 2024.5, schema 3.13.2; NVIDIA's
"SQLite Export Schema Reference" of the nsys exporter docs):

- ``StringIds(id, value)``: every name (kernels, runtime calls, NVTX text registered as a
  string) is an id into it; kernels carry ``demangledName`` (classified) and ``shortName``.
- ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET``: ``start``/``end`` in ns since
  the session start, ``deviceId``, ``streamId``, ``correlationId`` (the runtime call that
  launched it; a CUDA-graph replay's kernels share their ``cudaGraphLaunch``'s),
  ``globalPid``; ``graphNodeId`` (filled under ``--cuda-graph-trace=node``) and, in newer
  schemas, ``graphId`` are optional. Under ``--cuda-graph-trace=graph`` (the default) a
  replay is one row of ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` and its kernels are not listed.
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: ``start``, ``end``, ``nameId``, ``correlationId``,
  ``globalTid``; ``NVTX_EVENTS``: ``start``, ``end``, ``eventType``, ``text`` or ``textId``,
  ``globalTid``.
- Metadata: ``EXPORT_META_DATA`` (2022 and before) or ``META_DATA_EXPORT`` (2023 on), with
  ``EXPORT_PRODUCT_VERSION`` / ``EXPORT_SCHEMA_VERSION``; ``TARGET_INFO_SYSTEM_ENV``
  (``Hostname``, ``OsDescription``, ``CpuDescription``, ``CudaDriverVersion``...);
  ``TARGET_INFO_GPU`` (``id``, ``name``); ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``.

Exports are lazy by default (``EXPORT_PARAM_LAZY``): a table with no rows is left out (the
2024.5 file has no ``NVTX_EVENTS``), so every table and optional column is looked up
first. Text is not always UTF-8 (2022.2's ``TARGET_INFO_SYSTEM_ENV`` holds protobuf bytes):
it is decoded with replacement. A ``globalPid``/``globalTid`` packs the process id in bits
24-47 (the exporter docs' "Serialized process and thread identifiers").
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from collectors.trace.columns import NotATrace

SQLITE_MAGIC = b"SQLite format 3\x00"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
# NVTX_EVENTS.eventType of ranges (ENUM_NSYS_EVENT_TYPE): push/pop and start/end
NVTX_RANGES = (59, 60)
# what the runs row and the rank rows may say of the recording machine
_SYSTEM_KEYS = ("Hostname", "OsDescription", "CpuDescription", "CudaDriverVersion",
                "NvDriverVersion")  # fmt: skip


def is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


@dataclass
class Export:
    """An open export: its tables (name -> columns) and what its metadata says."""

    path: Path
    con: sqlite3.Connection
    tables: dict[str, list[str]]
    meta: dict[str, str] = field(default_factory=dict)  # EXPORT_* keys
    system: dict[str, str] = field(default_factory=dict)  # TARGET_INFO_SYSTEM_ENV subset
    gpus: dict[int, str] = field(default_factory=dict)  # deviceId -> name
    start_epoch_ns: int = 0  # the session start, Unix ns (0: unknown)

    @property
    def version(self) -> str | None:
        return self.meta.get("EXPORT_PRODUCT_VERSION")

    def has(self, table: str, *columns: str) -> bool:
        cols = self.tables.get(table)
        return cols is not None and all(c in cols for c in columns)

    def col(self, table: str, column: str, default: str = "NULL") -> str:
        """``column`` when the table has it, else ``default`` (an optional column)."""
        return column if column in self.tables.get(table, ()) else default


def open_export(path: Path) -> Export:
    """Open read-only and check it is an nsys export; NotATrace (one line) otherwise."""
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        tables = {n: [c[1] for c in con.execute(f'PRAGMA table_info("{n}")')] for n in names}
    except sqlite3.DatabaseError as exc:
        raise NotATrace(path, f"an unreadable SQLite file ({exc})") from None
    meta_table = next((t for t in META_TABLES if t in tables), None)
    if "StringIds" not in tables or meta_table is None:
        con.close()
        shown = ", ".join(sorted(tables)[:5]) or "none"
        raise NotATrace(path, "a SQLite file that is not an Nsight Systems export (no "
                        f"StringIds or {' / '.join(META_TABLES)} table; tables: {shown})")  # fmt: skip
    ex = Export(path, con, tables)
    try:
        _read_meta(ex, meta_table)
    except (sqlite3.DatabaseError, ValueError, TypeError, OverflowError) as exc:
        con.close()
        raise NotATrace(path, f"an unreadable Nsight Systems export ({exc})") from None
    return ex


def _read_meta(ex: Export, meta_table: str) -> None:
    con = ex.con
    ex.meta = dict(con.execute(f"SELECT name, value FROM {meta_table}").fetchall())
    if ex.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        marks = ",".join("?" * len(_SYSTEM_KEYS))
        ex.system = dict(con.execute(f"SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE "
                                     f"name IN ({marks})", _SYSTEM_KEYS).fetchall())  # fmt: skip
    if ex.has("TARGET_INFO_GPU", "id", "name"):
        ex.gpus = {int(i): n for i, n in con.execute("SELECT id, name FROM TARGET_INFO_GPU")
                   if n}  # fmt: skip
    if ex.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        ex.start_epoch_ns = int(row[0]) if row and row[0] else 0


def process_of(global_id: int | None) -> int:
    """The process part of a serialized globalPid/globalTid (bits 24 and up, VM id kept)."""
    return -1 if global_id is None else int(global_id) >> 24
