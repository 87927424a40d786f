"""What waits in a spool, from the filesystem alone (no store connection, no Parquet reads).

Used by ``python -m collectors doctor`` and by the Overview's "growing spool" warning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from store.spool.bundle import CORRUPT_DIR, abandoned_temp_entries, pending_entries


@dataclass(frozen=True)
class SpoolStatus:
    spool_dir: Path
    pending: int  # complete entries waiting for a commit
    oldest_age_s: float | None  # age of the oldest pending entry (None when none)
    corrupt: int  # entries moved aside to spool/corrupt/ (kept for a human)
    half_written: int  # temp folders of writers that died mid-spool


def spool_status(spool_dir: Path) -> SpoolStatus:
    now = time.time()
    pending = pending_entries(spool_dir)
    ages = []
    for entry in pending:
        try:
            ages.append(now - entry.stat().st_mtime)
        except FileNotFoundError:  # committed between listing and stat
            continue
    corrupt_dir = spool_dir / CORRUPT_DIR
    corrupt = sum(1 for _ in corrupt_dir.iterdir()) if corrupt_dir.is_dir() else 0
    return SpoolStatus(
        spool_dir=spool_dir,
        pending=len(ages),
        oldest_age_s=max(ages) if ages else None,
        corrupt=corrupt,
        half_written=len(abandoned_temp_entries(spool_dir)),
    )


def human_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"
