import gc
import sys

from collectors.cli import main

code = main()
# The interpreter's last garbage collections at exit walk every object that numpy's,
# pyarrow's and DuckDB's modules hold: about 25 ms of a small trace's 0.45 s import (issue
# 12). Frozen objects are skipped by those walks. Exit handlers still run, files are still
# flushed and closed, objects are still freed by reference count; only objects caught in
# reference cycles keep their __del__ unrun, which Python never promises at exit anyway
# (Python reference, "Data model", object.__del__).
gc.freeze()
sys.exit(code)
