"""Another process that holds a store's file lock or turn for the duration of a block."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import ROOT

TURN_HOLDER = (
    "import sys, time; from pathlib import Path; from store.turnstile import take_turn\n"
    "with take_turn(Path(sys.argv[1]), time.monotonic() + 5) as held:\n"
    "    print('held' if held else 'missed', flush=True); time.sleep(600)\n"
)
FILE_HOLDER = (
    "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
    "c.execute('select 1'); print('held', flush=True); time.sleep(600)"
)


@contextmanager
def held_by_another_process(code: str, store_file: Path) -> Iterator[None]:
    """Run ``code`` (which prints 'held' once it holds something) for the block."""
    proc = subprocess.Popen([sys.executable, "-c", code, str(store_file)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "held"
        yield
    finally:
        proc.kill()
        proc.wait()
