"""``flush``: commit every run waiting in the spool; corrupt entries are moved aside."""

from __future__ import annotations

import argparse

from collectors.core.context import Context
from collectors.core.errors import EXIT_FAILED, EXIT_OK, EXIT_STORE_BUSY
from collectors.core.words import first_few
from store.commit import flush
from store.errors import StoreBusy


def run(args: argparse.Namespace, ctx: Context) -> int:
    spool = ctx.loc.spool_dir
    try:
        report = flush(ctx.loc, timeout_s=ctx.commit_timeout)
    except StoreBusy as exc:
        ctx.log.error(f"{exc}; spooled runs stay in {spool}; run flush again later")
        ctx.emit({"committed": [], "busy": True})
        return EXIT_STORE_BUSY
    # A long backlog (a fleet host cut off for a day) is a count and the first few ids; --json
    # lists every one.
    if report.committed:
        ctx.log.info(f"committed {len(report.committed)} run(s): {first_few(report.committed)}")
    if report.already_present:
        ctx.log.info(f"{len(report.already_present)} run(s) were already in the store, removed "
                     f"from the spool: {first_few(report.already_present)}")  # fmt: skip
    for name, reason, target in report.moved_aside:
        ctx.log.warning(
            f"spool entry {name} is corrupt ({reason}); moved to {target}, not committed"
        )
    for name, reason in report.failed:
        ctx.log.error(f"spool entry {name} not committed: {reason}")
    for name in report.held_elsewhere:
        ctx.log.info(f"spool entry {name} is being committed by another process; left to it")
    if not any(vars(report).values()):
        ctx.log.info(f"nothing pending in {spool}")
    ctx.emit({
        "committed": report.committed, "already_present": report.already_present,
        "moved_aside": [{"entry": n, "reason": r, "path": t} for n, r, t in report.moved_aside],
        "failed": [{"entry": n, "reason": r} for n, r in report.failed],
        "held_elsewhere": report.held_elsewhere,
    })  # fmt: skip
    return EXIT_FAILED if report.failed else EXIT_OK
