"""The Overview's answer: which hosts report, which collectors went stale, and the newest
regressions the last `collectors check` found (its run's findings, migration 0016: the
Overview never analyses the series itself, ~50,000 of them at a fleet's 10,000 runs).

Pure: frames in, frames and words out.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd

CHECK = "python -m collectors check"


def with_staleness(fresh: pd.DataFrame, now: datetime, hours: int) -> pd.DataFrame:
    """Freshness rows (host x collector) with ``stale``: no successful run in ``hours``."""
    limit = pd.Timedelta(hours=int(hours))
    # bool dtype even with no rows: an empty object column would index columns, not rows
    stale = pd.Series([pd.isna(t) or now - pd.Timestamp(t) > limit for t in fresh["last_ok_at"]],
                      index=fresh.index, dtype=bool)  # fmt: skip
    return fresh.assign(stale=stale)


def host_table(hosts: pd.DataFrame, fresh: pd.DataFrame, regressed: pd.DataFrame,
               age) -> pd.DataFrame:  # fmt: skip
    """One row per host: its inventory, runs, last seen, its stale collectors and how many of
    its series regressed at the last check; hosts with something to look at first."""
    stale = fresh[fresh["stale"]].groupby("host")["verb"].agg(lambda v: ", ".join(sorted(v)))
    regressed = regressed["host"].value_counts() if len(regressed) else pd.Series(dtype=int)
    table = hosts.assign(
        last_seen=[age(t) + " ago" for t in hosts["last_seen_at"]],
        stale_collectors=hosts["host"].map(stale).fillna(""),
        regressions=hosts["host"].map(regressed).fillna(0).astype(int),
    )
    worst = (table["stale_collectors"] != "") | (table["regressions"] > 0)
    return table.iloc[(~worst).to_numpy().argsort(kind="stable")].reset_index(drop=True)


def regression_table(regressed: pd.DataFrame) -> pd.DataFrame:
    """A check's regressions as the Overview lists them (newest move first)."""
    table = regressed.assign(change_pct=(regressed["change"] * 100).round(1),
                             before=regressed["before"].round(2),
                             after=regressed["after"].round(2))  # fmt: skip
    return table[["host", "change_pct", "series", "before", "after", "unit", "since_run_id",
                  "since_at", "runs_since", "versions_changed"]]


def sentence(hosts: int, stale: pd.DataFrame, regressed: int | None, series: int | None,
             hours: int, checked_ago: str) -> str:  # fmt: skip
    """'50 hosts report; 12 collectors on 7 hosts had no successful run in 24 h; 3 of 51,203
    series regressed at the last check (5 h ago).' (counts only: the tables name them)."""
    pairs, on = len(stale), stale["host"].nunique()
    text = f"**{hosts:,}** host{'s' if hosts != 1 else ''} report"
    text += (f"; **{pairs:,}** collector{'s' if pairs != 1 else ''} on {on:,} host"
             f"{'s' if on != 1 else ''} had no successful run in {hours} h" if pairs
             else f"; every collector ran successfully in the last {hours} h")  # fmt: skip
    if regressed is None:
        return text + f"; no `{CHECK}` has run yet to say what regressed."
    of = f" of {series:,}" if series else ""
    return text + (f"; **{regressed:,}**{of} series regressed at the last check ({checked_ago})."
                   if regressed else f"; none{of} series regressed at the last check "
                   f"({checked_ago}).")  # fmt: skip
