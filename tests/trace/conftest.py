from __future__ import annotations

import gzip
import json
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
    """A crashed run's trace: the h100 fixture cut at 80% and named .tmp (its first kernel
    is at 67%: cut before it, the file would hold no GPU event and be refused)."""
    data = gzip.decompress(fixture("tracelens/h100_qwen1.5_0.5b.json.gz").read_bytes())
    out = tmp_path / "h100_rank0.pt.trace.json.tmp"
    out.write_bytes(data[: int(len(data) * 0.8)])
    return out


GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def gpu_union(path: Path) -> tuple[float, float]:
    """(busy, span) of a Kineto file's GPU events, computed apart from the importer: a plain
    JSON load and a sorted sweep over every complete kernel, memcpy and memset interval;
    rounded to the nanosecond (3 decimals of a microsecond)."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                   if e.get("cat") in GPU_CATS and e.get("ph", "X") == "X")  # fmt: skip
    busy, (lo, hi) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > hi:
            busy += hi - lo
            lo, hi = s, e
        else:
            hi = max(hi, e)
    busy += hi - lo
    return round(busy, 3), round(max(e for _s, e in spans) - spans[0][0], 3)
