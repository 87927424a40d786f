"""Errors a collector reports as one line naming the input and what is wrong (exit 1)."""


class InputError(Exception):
    """The user's input (a file, a flag, a URL) is unusable; the message says why."""


class MeasurementError(Exception):
    """A measurement could not complete (a rank hung or died, a server went away)."""


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STORE_BUSY = 75  # EX_TEMPFAIL: bundle kept in the spool
EXIT_INTERRUPTED = 130
