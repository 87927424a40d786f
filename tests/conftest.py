from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh embedded store location (the file is created by the first commit)."""
    return tmp_path / "store" / "stepscope.duckdb"


def pytest_report_header() -> list[str]:
    """Name the versions this run tested against (the log is then enough to reproduce it)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("duckdb", "streamlit", "plotly", "pandas", "pyarrow", "torch", "playwright"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ["stepscope deps: " + ", ".join(found)]
