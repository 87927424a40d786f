"""``export RUN_ID --out PATH``: one run, every table, as Parquet files plus a manifest.

``PATH`` ending in ``.zip`` gives one zip file (handy to send); anything else is a folder
(created; it must not exist or be empty). Each table keeps its ``run_id`` column so the files
read well on their own; ``import`` drops it again and commits through the normal spool.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError

EXPORT_FORMAT = "stepscope-run-export"
EXPORT_VERSION = 1
MANIFEST = "manifest.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="absolute run id (see the Overview)")
    parser.add_argument("--out", required=True, metavar="FILE.zip|DIR",
                        help="a .zip file, or a new/empty folder")  # fmt: skip


def _write_folder(tables: dict, folder: Path, run_id: str, schema_version: int) -> int:
    import pyarrow.parquet as pq

    entries, total = {}, 0
    for name, table in tables.items():
        path = folder / f"{name}.parquet"
        pq.write_table(table, path, compression="zstd")
        data = path.read_bytes()
        total += len(data)
        entries[name] = {"file": path.name, "rows": table.num_rows,
                         "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    manifest = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "run_id": run_id,
                "schema_version": schema_version, "tables": entries}  # fmt: skip
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return total


def run(args: argparse.Namespace, ctx: Context) -> int:
    from store import migrate
    from store.transfer import run_tables

    out = Path(args.out).expanduser()
    as_zip = out.suffix.lower() == ".zip"
    if as_zip and out.exists():
        raise InputError(f"--out {out}: the file exists; choose a new name")
    if not as_zip and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"--out {out}: exists and is not an empty folder")
    tables = run_tables(ctx.loc, args.run_id)
    if tables is None:
        raise InputError(f"{args.run_id}: no such run in {ctx.loc.describe()}")
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".stepscope-export-", dir=parent))
    try:
        size = _write_folder(tables, tmp, args.run_id, migrate.code_version())
        if as_zip:
            part = out.with_name(f".{out.name}.part")
            with zipfile.ZipFile(part, "w", compression=zipfile.ZIP_STORED) as zf:
                for path in sorted(tmp.iterdir()):
                    zf.write(path, arcname=path.name)
            os.replace(part, out)
        else:
            if out.exists():
                out.rmdir()
            os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = {name: t.num_rows for name, t in tables.items()}
    ctx.log.info(f"exported run {args.run_id} to {out} ({len(rows)} table(s), "
                 f"{sum(rows.values())} row(s), {size / 1e6:.1f} MB)")  # fmt: skip
    ctx.emit({"run_id": args.run_id, "out": str(out), "rows": rows})
    return EXIT_OK
