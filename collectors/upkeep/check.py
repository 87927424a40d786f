"""``check``: has any measured series moved? The newest level of every series against the
level before it, one line per regression or improvement; exit 3 when any regressed.

A series is one figure at one fixed point on one host (store/migrations/0011_series.sql);
the detection is analysis/regress.py, the findings analysis/trends.py. Nothing is written.

    python -m collectors check --since 7d --min-change 5%
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta

from analysis import regress
from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError
from collectors.core.log import printable

EXIT_REGRESSION = 3  # the store is fine and a series got worse (cron and CI branch on it)
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
FILLED_BY = ("vllm-bench / sglang-bench (serving), comm / nccl-tests (collectives), "
             "trace / profile / vllm-profile (steps)")  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", metavar="WHEN",
                        help="only moves whose first run at the new level is this recent: "
                        "7d, 36h, 90m, 2w, or a date/time (2026-11-20, 2026-11-20T06:00Z); "
                        "older runs still make the baseline")  # fmt: skip
    parser.add_argument("--min-change", default=f"{regress.MIN_CHANGE * 100:g}%", metavar="PCT",
                        help="smallest move between two levels to report, in percent "
                        f"(default {regress.MIN_CHANGE * 100:g}%%)")  # fmt: skip
    parser.add_argument("--min-runs", type=int, default=regress.MIN_RUNS, metavar="N",
                        help="runs a new level needs before it counts (default "
                        f"{regress.MIN_RUNS}; a single outlier never does)")  # fmt: skip


def parse_since(text: str) -> datetime:
    """``7d`` / ``36h`` / ``90m`` / ``2w`` back from now, or an ISO date or time (UTC when it
    names no zone)."""
    if match := _RELATIVE.match(text.strip().lower()):
        return datetime.now(UTC) - timedelta(**{_UNITS[match[2]]: float(match[1])})
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--since: {text!r} is neither a date/time (2026-11-20, "
                         "2026-11-20T06:00Z) nor an age like 7d, 36h, 90m") from None  # fmt: skip
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def parse_min_change(text: str) -> float:
    """``5%`` or ``5``: percent, as a fraction."""
    try:
        pct = float(text.strip().removesuffix("%"))
    except ValueError:
        raise InputError(f"--min-change: {text!r} is not a percentage like 5%") from None
    if not 0 < pct < 1000:
        raise InputError(f"--min-change: {text!r} must be above 0% and below 1000%")
    return pct / 100


def run(args: argparse.Namespace, ctx: Context) -> int:
    from analysis import trends
    from store.queries import series as queries_series

    since = parse_since(args.since) if args.since else None
    min_change = parse_min_change(args.min_change)
    if args.min_runs < 2:
        raise InputError(f"--min-runs: {args.min_runs} must be at least 2")
    host = args.host_name
    if host and not queries_series.host_known(ctx.loc, host):
        raise InputError(f"--host {host}: no runs about this host in {ctx.loc.describe()}")
    points = queries_series.series_points(ctx.loc, host)
    analysed = trends.analyse(points, min_change, args.min_runs)
    found = trends.findings(analysed, since)
    regressions = [f for f in found if f.kind == "regression"]
    summary = {
        "store": ctx.loc.describe(), "host": host, "since": since.isoformat() if since else None,
        "min_change_pct": min_change * 100, "min_runs": args.min_runs,
        "series": len(analysed), "runs": int(points["run_id"].nunique()),
        "regressions": [f.as_dict() for f in regressions],
        "improvements": [f.as_dict() for f in found if f.kind == "improvement"],
    }  # fmt: skip
    if args.json:
        ctx.emit(summary)
    else:
        sys.stdout.write("".join(printable(f.line()) + "\n" for f in found))
        sys.stdout.flush()
    if not analysed:
        ctx.log.warning(f"no series{' for host ' + host if host else ''} yet; they fill from "
                        f"{FILLED_BY}")  # fmt: skip
    ctx.log.info(f"checked {len(analysed)} series over {summary['runs']} runs: "
                 f"{len(regressions)} regression(s), {len(found) - len(regressions)} "
                 "improvement(s)")  # fmt: skip
    return EXIT_REGRESSION if regressions else EXIT_OK
