"""The planner's user-facing error: one line naming the input and what is wrong."""

from __future__ import annotations


class PlannerInputError(ValueError):
    """Bad input (config.json, host, layout, concurrency): the message is one plain line."""
