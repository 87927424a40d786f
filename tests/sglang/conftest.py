"""Fixtures: the real SGLang-shaped HTTP server (tests/sglang/server.py) and rank traces."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.vllm.conftest import ServerProc

MODEL = "Qwen/Qwen3-30B-A3B"


@pytest.fixture(scope="session")
def sglang_traces(tmp_path_factory) -> list[Path]:
    """Two real CPU torch.profiler traces with SGLang step ranges (tests/sglang/make_traces.py)."""
    out = tmp_path_factory.mktemp("sglang-traces")
    subprocess.run([sys.executable, "-m", "tests.sglang.make_traces", str(out), "2"], cwd=ROOT,
                   check=True, timeout=300)  # fmt: skip
    found = sorted(out.glob("*.trace.json.gz"))
    assert len(found) == 2, found
    return found


@pytest.fixture
def sglang_server(tmp_path: Path) -> Iterator[Callable[..., ServerProc]]:
    started: list[ServerProc] = []

    def start(traces: list[Path] | None = None, **overrides) -> ServerProc:
        trace_dir = tmp_path / f"sgl-traces-{len(started)}"
        trace_dir.mkdir()
        cfg = {"model": MODEL, "version": "0.5.4", "tp": 2, "trace_dir": str(trace_dir),
               "trace_sources": [str(p) for p in traces or []], "flush_delay_s": 0.3,
               **overrides}  # fmt: skip
        server = ServerProc.launch("tests.sglang.server", cfg,
                                   tmp_path / f"sgl-server-{len(started)}.json", trace_dir)  # fmt: skip
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()
