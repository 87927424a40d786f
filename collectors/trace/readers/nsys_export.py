"""An ``.nsys-rep`` report -> its SQLite export, with the ``nsys`` on this machine.

The report format itself is Nsight Systems' own; the SQLite export is what the reader
reads. ``nsys export --type sqlite --output OUT REPORT`` writes it (the exporter docs:
"nsys export [options] [nsys-rep-file]"; ``--force-overwrite true`` replaces an older
export). An export already beside the report and newer than it is used as it is. Without
``nsys`` on PATH, one line says which command to run where it is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from collectors.core.errors import InputError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")  # .qdrep: reports of nsys before 2021.4


def is_report(path: Path) -> bool:
    return path.name.endswith(REPORT_SUFFIXES)


def export_command(report: Path, out: Path) -> list[str]:
    return ["nsys", "export", "--type", "sqlite", "--force-overwrite", "true",
            "--output", str(out), str(report)]  # fmt: skip


def sqlite_for(report: Path, timeout_s: float = 3600.0) -> Path:
    """The SQLite export of ``report`` (made now when none newer is beside it)."""
    out = report.with_name(report.name.rsplit(".", 1)[0] + ".sqlite")
    if out.exists() and out.stat().st_mtime >= report.stat().st_mtime:
        return out
    command = export_command(report, out)
    exe = shutil.which("nsys")
    if exe is None:
        raise InputError(f"{report}: an Nsight Systems report; this machine has no nsys to "
                         f"export it: run `{' '.join(command)}` where nsys is installed, "
                         f"then import {out.name}")  # fmt: skip
    try:
        done = subprocess.run([exe, *command[1:]], capture_output=True, text=True,
                              timeout=timeout_s, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise InputError(f"{report}: `nsys export` did not finish in {timeout_s:.0f} s") from None
    if done.returncode != 0 or not out.exists():
        why = (done.stderr or done.stdout).strip().splitlines()
        raise InputError(f"{report}: `{' '.join(command)}` failed (exit {done.returncode}"
                         f"{': ' + why[-1][:200] if why else ''})")  # fmt: skip
    return out
