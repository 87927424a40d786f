"""The full-precision policy: a versioned rules file (``check``; policies/), the linter for
launch commands, units and env files (``lint*``), and checks on stored trace runs
(``trace_check``). Every surface reduces what it sees to a ``Precision`` and calls
``check.check_precision``.
"""
