"""Errors the store raises; each message is one line a user can act on."""


class StoreError(Exception):
    """The store cannot be used as asked (missing, newer schema, bad URL)."""


class StoreBusy(StoreError):
    """Another process holds the store read-write past the retry budget."""


class StoreMissing(StoreError):
    """No store exists at the location yet."""


def is_lock_conflict(exc: BaseException) -> bool:
    """DuckDB's file lock conflict: another process has the file open read-write."""
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text
