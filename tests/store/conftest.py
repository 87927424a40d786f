from __future__ import annotations

from pathlib import Path

import pytest

from store.location import StoreLocation, resolve


@pytest.fixture
def loc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StoreLocation:
    """An embedded store in a temp dir (tests/lake/ runs the same suite on DuckLake)."""
    monkeypatch.delenv("STEPSCOPE_SPOOL", raising=False)
    return resolve(tmp_path / "s" / "stepscope.duckdb")
