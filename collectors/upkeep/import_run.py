"""``import PATH``: commit a run made by ``export`` (a .zip or a folder) into this store.

The input is treated as hostile: only ``manifest.json`` and ``<table>.parquet`` flat names,
a size limit checked on the bytes really read (zip bombs), checksums, Parquet parsed by
pyarrow (data only: nothing is executed), every row type-checked against this code's schema
before it reaches the spool. Then the normal spool -> commit path runs with the ORIGINAL run
id, so importing the same run twice, or into the store it came from, changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import tempfile
import zipfile
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.core import inputs
from collectors.core.context import Context
from collectors.core.errors import InputError
from collectors.upkeep.export_run import EXPORT_FORMAT, EXPORT_VERSION, MANIFEST

DEFAULT_MAX_MB = 1024
MAX_FILES = 200
_FILE = re.compile(r"^(manifest\.json|[a-z][a-z0-9_]{0,62}\.parquet)$")
_TABLE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a .zip or folder written by `export`")
    parser.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB, metavar="MB",
                        help=f"refuse inputs larger than this (default {DEFAULT_MAX_MB})")  # fmt: skip


@contextmanager
def staged(path: Path, max_bytes: int):  # noqa: ANN201 - yields a folder Path
    """A folder holding only the export's validated flat files."""
    if path.is_dir():
        total = 0
        for child in path.iterdir():
            if not _FILE.match(child.name) or child.is_symlink() or not child.is_file():
                raise InputError(f"{path}: unexpected entry {child.name!r} in an export folder")
            total += child.stat().st_size
        if total > max_bytes:
            raise InputError(
                f"{path}: {total / 1e6:.0f} MB is over the {max_bytes / 1e6:.0f} MB limit"
            )
        yield path
        return
    inputs.check_file(path, "a .zip export", folders_ok=True)  # a FIFO is named, not read
    tmp = Path(tempfile.mkdtemp(prefix="stepscope-import-"))
    try:
        _unzip(path, tmp, max_bytes)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _unzip(path: Path, dest: Path, max_bytes: int) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_FILES:
                raise InputError(f"{path}: {len(infos)} entries; an export has at most {MAX_FILES}")
            seen, total = set(), 0
            for info in infos:
                name = info.filename
                if info.is_dir() or not _FILE.match(name) or name in seen:
                    raise InputError(f"{path}: unexpected entry {name[:80]!r} in the zip")
                seen.add(name)
                with zf.open(info) as src, (dest / name).open("wb") as out:
                    while block := src.read(1 << 20):
                        total += len(block)  # counted on real bytes, not the header's claim
                        if total > max_bytes:
                            raise InputError(f"{path}: unpacks to over the "
                                             f"{max_bytes / 1e6:.0f} MB limit")  # fmt: skip
                        out.write(block)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise InputError(f"{path}: not a readable .zip export ({exc})") from None
    except RuntimeError as exc:  # encrypted entries
        raise InputError(f"{path}: {exc}") from None


def _manifest(folder: Path, label: Path) -> dict[str, Any]:
    from store import migrate

    file = folder / MANIFEST
    if not file.is_file():
        raise InputError(f"{label}: no {MANIFEST}; not a Stepscope export")
    try:
        manifest = json.loads(inputs.read_bytes(file, 1 << 20, MANIFEST))
    except (ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise InputError(f"{label}: {MANIFEST} is not valid JSON ({why})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        raise InputError(f"{label}: {MANIFEST} is not a Stepscope run export")
    if manifest.get("version") != EXPORT_VERSION:
        raise InputError(f"{label}: export format version {manifest.get('version')!r} unknown")
    run_id, schema_version = manifest.get("run_id"), manifest.get("schema_version")
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise InputError(f"{label}: run id {str(run_id)[:80]!r} is malformed")
    if not isinstance(schema_version, int) or schema_version > migrate.code_version():
        raise InputError(f"{label}: exported with schema v{schema_version}, newer than this "
                         f"Stepscope (v{migrate.code_version()}); upgrade Stepscope")  # fmt: skip
    tables = manifest.get("tables")
    if not isinstance(tables, dict) or "runs" not in tables:
        raise InputError(f"{label}: {MANIFEST} lists no runs table")
    for name, info in tables.items():
        if not _TABLE.match(str(name)) or not isinstance(info, dict):
            raise InputError(f"{label}: table entry {str(name)[:80]!r} is malformed")
        if info.get("file") != f"{name}.parquet" or not (folder / info["file"]).is_file():
            raise InputError(f"{label}: file for table {name} is missing")
        digest = hashlib.sha256((folder / info["file"]).read_bytes()).hexdigest()
        if digest != info.get("sha256"):
            raise InputError(f"{label}: {info['file']} does not match its checksum")
    return manifest


def _read(folder: Path, label: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_id, tables = manifest["run_id"], {}
    for name, info in manifest["tables"].items():
        try:
            table = pq.read_table(folder / info["file"])
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{label}: {info['file']} is not readable Parquet ({exc})") from None
        if table.num_rows != info.get("rows"):
            raise InputError(f"{label}: {info['file']} has {table.num_rows} rows, "
                             f"manifest says {info.get('rows')}")  # fmt: skip
        if "run_id" not in table.column_names:
            raise InputError(f"{label}: {info['file']} lacks its run_id column")
        ids = set(table.column("run_id").to_pylist())
        if ids - {run_id}:
            raise InputError(f"{label}: {info['file']} holds rows of another run")
        tables[name] = table.drop_columns(["run_id"])
    if tables["runs"].num_rows != 1:
        raise InputError(f"{label}: runs.parquet must hold exactly one row")
    return tables


def _iso(value: Any, field: str, label: Path) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    try:
        return datetime.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise InputError(f"{label}: runs.{field} is not a timestamp") from None


def _record(row: dict[str, Any], run_id: str, label: Path):  # noqa: ANN202
    from store.spool.bundle import RunRecord

    for key in ("verb", "host", "status", "started_at"):
        if not row.get(key):
            raise InputError(f"{label}: runs row lacks {key}")
    objects = {}
    for key in ("env", "args"):
        try:
            value = json.loads(row.get(key) or "{}")
        except (TypeError, ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise InputError(f"{label}: runs.{key} is not a JSON object")
        objects[key] = value
    return RunRecord(
        run_id=run_id, verb=str(row["verb"]), host=str(row["host"]),
        started_at=_iso(row["started_at"], "started_at", label),
        finished_at=_iso(row.get("finished_at"), "finished_at", label) or
        _iso(row["started_at"], "started_at", label),
        status=str(row["status"]), label=row.get("label"), message=row.get("message"),
        env=objects["env"], args=objects["args"],
    )  # fmt: skip


def run(args: argparse.Namespace, ctx: Context) -> int:
    from store.spool.bundle import Bundle
    from store.transfer import check_against_schema

    path = Path(args.path).expanduser()
    with staged(path, int(args.max_mb * 1e6)) as folder:
        manifest = _manifest(folder, path)
        tables = _read(folder, path, manifest)
        runs = tables.pop("runs")
        try:
            row = runs.to_pylist()[0]
        except (ValueError, TypeError) as exc:
            raise InputError(f"{path}: runs.parquet has unreadable values ({exc})") from None
        record = _record(row, manifest["run_id"], path)
        if problem := check_against_schema(tables):
            raise InputError(f"{path}: {problem}")
        rows = {name: t.num_rows for name, t in tables.items()}
        bundle = Bundle(record, tables)
        ctx.log.info(f"importing run {record.run_id} ({record.verb} on {record.host}; "
                     f"{sum(rows.values())} row(s) in {len(rows)} table(s))")  # fmt: skip
        return ctx.submit(bundle, {"verb": record.verb, "host": record.host, "rows": rows})
