"""The Overview's answer helpers on a host with no freshness rows (a link's unknown host)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from pages.helpers import overview_answer as oa


def test_no_freshness_rows_make_no_stale_collectors() -> None:
    empty = pd.DataFrame({"host": pd.Series(dtype=str), "verb": pd.Series(dtype=str),
                          "last_ok_at": pd.Series(dtype="datetime64[us, UTC]")})  # fmt: skip
    fresh = oa.with_staleness(empty, datetime.now(UTC), 24)
    stale = fresh[fresh["stale"]]
    assert list(stale.columns) == ["host", "verb", "last_ok_at", "stale"] and stale.empty
    assert "every collector ran successfully" in oa.sentence(0, stale, None, None, 24, "")


def test_a_collector_past_the_threshold_is_stale() -> None:
    now = datetime.now(UTC)
    fresh = oa.with_staleness(pd.DataFrame({
        "host": ["a", "a", "b"], "verb": ["gpu", "trace", "gpu"],
        "last_ok_at": [now - pd.Timedelta(hours=30), now, None]}), now, 24)  # fmt: skip
    assert fresh["stale"].tolist() == [True, False, True]
    assert "**2** collectors on 2 hosts had no successful run in 24 h" in oa.sentence(
        2, fresh[fresh["stale"]], None, None, 24, "")
