"""The store's one retry loop: transient errors wait and retry, others pass through."""

from __future__ import annotations

import pytest

from store.retry import jittered, retry


class Busy(Exception):
    pass


class GaveUp(Exception):
    pass


def test_transient_errors_are_retried_until_success() -> None:
    calls = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Busy("locked")
        return "opened"

    result = retry(attempt, transient=lambda e: isinstance(e, Busy), timeout_s=5,
                   give_up=GaveUp, first_delay_s=0.001)  # fmt: skip
    assert result == "opened" and len(calls) == 3


def test_other_errors_propagate_at_once() -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise ValueError("not a store")

    with pytest.raises(ValueError, match="not a store"):
        retry(attempt, transient=lambda e: isinstance(e, Busy), timeout_s=5, give_up=GaveUp)
    assert len(calls) == 1


def test_past_the_deadline_it_gives_up_with_the_cause_chained() -> None:
    def attempt() -> None:
        raise Busy("still locked")

    with pytest.raises(GaveUp) as info:
        retry(attempt, transient=lambda e: isinstance(e, Busy), timeout_s=0.05,
              give_up=lambda e: GaveUp(f"gave up: {e}"), first_delay_s=0.001)  # fmt: skip
    assert "still locked" in str(info.value)
    assert isinstance(info.value.__cause__, Busy)


def test_without_give_up_the_last_error_itself_is_raised() -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise Busy(f"still locked ({len(calls)})")

    with pytest.raises(Busy) as info:
        retry(attempt, transient=lambda e: isinstance(e, Busy), timeout_s=0.05,
              first_delay_s=0.001)  # fmt: skip
    assert len(calls) > 1 and str(info.value) == f"still locked ({len(calls)})"


def test_jitter_stays_within_half_and_one_and_a_half() -> None:
    values = [jittered(1.0) for _ in range(200)]
    assert all(0.5 <= v < 1.5 for v in values)
    assert max(values) - min(values) > 0.1  # it really spreads
