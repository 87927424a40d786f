import gc

# Python's cyclic garbage collector walks every new object, and the start-up imports
# (numpy, pyarrow, DuckDB, the environment snapshot's email package) make tens of thousands
# of them: 25-30 ms of CPU across the collector and its commit helper for a small trace
# (issue 12). An import verb is a short batch job whose data lives in numpy arrays and
# dicts that reference counting frees (the 54 MB and 381 MB traces peak at the same RSS
# with the collector off), so it stays off; collectors/lock.py turns it back on for a
# measurement, which runs torch, NCCL or an asyncio load for minutes.
gc.disable()

import sys  # noqa: E402 - after gc.disable(), so the imports below are not walked

from collectors.cli import main  # noqa: E402

code = main()
# The interpreter's last garbage collections at exit walk every object that numpy's,
# pyarrow's and DuckDB's modules hold: about 25 ms of a small trace's 0.45 s import (issue
# 12). Frozen objects are skipped by those walks. Exit handlers still run, files are still
# flushed and closed, objects are still freed by reference count; only objects caught in
# reference cycles keep their __del__ unrun, which Python never promises at exit anyway
# (Python reference, "Data model", object.__del__).
gc.freeze()
sys.exit(code)
