"""The quick tier's exclusions name real files (a rename would silently put a slow file back)."""

from __future__ import annotations

from tests.conftest import SLOW_FILES
from tests.helpers import ROOT


def test_every_slow_file_exists() -> None:
    assert [f for f in sorted(SLOW_FILES) if not (ROOT / f).is_file()] == []
