from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh embedded store location (the file is created by the first commit)."""
    return tmp_path / "store" / "stepscope.duckdb"
