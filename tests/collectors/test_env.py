"""The environment snapshot: package versions read without importlib.metadata."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT


def test_the_snapshot_never_imports_importlib_metadata() -> None:
    """importlib.metadata imports the email package (~30 ms on a small import's path)."""
    probe = ("import sys\nfrom collectors import env\ns = env.snapshot()\n"
             "print(s['python'], 'importlib.metadata' in sys.modules, 'email' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    assert out == [sys.version.split()[0], "False", "False"]
