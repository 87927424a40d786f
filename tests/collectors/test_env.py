"""The environment snapshot: package versions from installed metadata, torch never imported."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from collectors.inventory.env import package_version
from tests.helpers import ROOT


def test_the_snapshot_records_versions_without_importing_torch() -> None:
    probe = ("import json, sys\nfrom collectors.inventory import env\ns = env.snapshot()\n"
             "print(json.dumps([s['python'], s['torch'], 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    python, torch, imported = json.loads(out)
    assert python == sys.version.split()[0]
    assert torch == metadata.version("torch")  # requirements-gpu.txt pins it
    assert imported is False


def test_a_package_that_is_not_installed_has_no_version() -> None:
    assert package_version("no-such-distribution-here") is None
    assert package_version("Typing.Extensions") == metadata.version("typing_extensions")
