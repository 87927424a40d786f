from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.helpers import FIXTURES

TRACES = FIXTURES / "traces"


def fixture(rel: str) -> Path:
    """A real trace from tests/fixtures/traces; skip when it is absent."""
    path = TRACES / rel
    if not path.exists():
        pytest.skip(f"fixture {path} not present")
    return path


@pytest.fixture
def truncated_tmp(tmp_path: Path) -> Path:
    """A crashed run's trace: the h100 fixture cut at 60% and named .tmp."""
    data = gzip.decompress(fixture("tracelens/h100_qwen1.5_0.5b.json.gz").read_bytes())
    out = tmp_path / "h100_rank0.pt.trace.json.tmp"
    out.write_bytes(data[: int(len(data) * 0.6)])
    return out
