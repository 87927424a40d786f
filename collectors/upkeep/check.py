"""``check``: has any measured series moved? The newest level of every series against the
level before it, one line per regression or improvement; exit 3 when any regressed.

A series is one figure at one fixed point on one host (store/migrations/0011_series.sql);
the detection is analysis/regress.py, the findings analysis/trends.py. What it found is
committed as a ``check`` run (migration 0016: every finding, and the points of the series
it names), which the Overview and the Trends page show; ``--dry-run`` commits nothing.

    python -m collectors check --since 7d --min-change 5%
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta

from analysis import regress
from collectors.core.context import Context
from collectors.core.errors import InputError
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
    every = trends.findings(analysed)  # kept in the store whatever --since says
    found = [f for f in every if since is None or f.since_at >= since]
    regressions = [f for f in found if f.kind == "regression"]
    summary = {
        "store": ctx.loc.describe(), "host": host, "since": since.isoformat() if since else None,
        "min_change_pct": min_change * 100, "min_runs": args.min_runs,
        "series": len(analysed), "runs": int(points["run_id"].nunique()),
        "regressions": [f.as_dict() for f in regressions],
        "improvements": [f.as_dict() for f in found if f.kind == "improvement"],
    }  # fmt: skip
    if not args.json:
        sys.stdout.write("".join(printable(f.line()) + "\n" for f in found))
        sys.stdout.flush()
    if not analysed:
        ctx.log.warning(f"no series{' for host ' + host if host else ''} yet; they fill from "
                        f"{FILLED_BY}")  # fmt: skip
    ctx.log.info(f"checked {len(analysed)} series over {summary['runs']} runs: "
                 f"{len(regressions)} regression(s), {len(found) - len(regressions)} "
                 "improvement(s)")  # fmt: skip
    code = commit(ctx, analysed, every, points, {"series": len(analysed), "points": len(points),
                                       "runs": summary["runs"], "host": host,
                                       "min_change_pct": min_change * 100,
                                       "min_runs": args.min_runs}, summary)  # fmt: skip
    # a regression is the answer cron branches on, even when the store was busy (75: the
    # findings wait in the spool for the next flush)
    return EXIT_REGRESSION if regressions else code


def commit(ctx: Context, analysed: list, every: list, points, checked: dict,
           summary: dict) -> int:  # fmt: skip
    """Every finding, its series' level changes and points, as one ``check`` run."""
    import json

    import pandas as pd

    from store.spool.bundle import Bundle, new_run_id

    shifts = {t.series_id: json.dumps([[s.index, s.before, s.after] for s in t.shifts])
              for t in analysed if t.shifts}  # fmt: skip
    findings = pd.DataFrame([{**f.as_row(), "shifts": shifts[f.series_id], "line": f.line()}
                             for f in every], columns=[*FINDING_COLUMNS, "shifts", "line"])  # fmt: skip
    named = points[points["series_id"].isin(set(findings["series_id"]))]
    kept = named[list(POINT_COLUMNS)].rename(columns={"run_id": "point_run_id"})
    record = ctx.run_record(new_run_id("check"),
                            message=f"{len(every)} finding(s) over {checked['series']} series")  # fmt: skip
    record.args.update(checked)
    return ctx.submit(Bundle(record, {"check_findings": findings, "check_points": kept}), summary)


FINDING_COLUMNS = ("kind", "series_id", "family", "host", "series", "metric_label", "unit",
                   "better", "before", "after", "change", "since_run_id", "since_at",
                   "runs_since", "newest_run_id", "versions_changed")  # fmt: skip
POINT_COLUMNS = ("series_id", "family", "host", "series", "point", "metric", "metric_label",
                 "unit", "better", "run_id", "measured_at", "value", "engine", "engine_version",
                 "torch", "nccl", "driver")  # fmt: skip
