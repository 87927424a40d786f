"""Fixtures: real rank traces (made once per session) and a real HTTP test server."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli_env

MODEL = "moonshotai/Kimi-K2.5"


@pytest.fixture(scope="session")
def rank_traces(tmp_path_factory) -> list[Path]:
    """Two real per-rank torch.profiler traces, preferably from our own `profile` collector."""
    tmp = tmp_path_factory.mktemp("rank-traces")
    keep = tmp / "kept"
    subprocess.run(
        [sys.executable, "-m", "collectors", "profile", "--keep-traces", str(keep), "--dry-run",
         "--tp", "2", "--steps", "1", "--warmup", "0", "--layers", "1", "--timeout", "120",
         "--log-format", "text"],
        cwd=ROOT, env=cli_env(tmp / "unused.duckdb"), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    found = sorted(keep.rglob("*.json*")) if keep.exists() else []
    if len(found) < 2:  # the profile collector is not usable here: real CPU traces instead
        out = tmp / "made"
        subprocess.run([sys.executable, "-m", "tests.vllm.make_traces", str(out), "2"],
                       cwd=ROOT, check=True, timeout=300)  # fmt: skip
        found = sorted(out.glob("*.json*"))
    assert len(found) >= 2, "no rank traces could be made"
    gz = []  # vLLM writes gzipped traces (*.pt.trace.json.gz)
    for i, path in enumerate(found[:2]):
        target = tmp / f"rank{i}.pt.trace.json.gz"
        data = path.read_bytes()
        target.write_bytes(data if data[:2] == b"\x1f\x8b" else gzip.compress(data, 1))
        gz.append(target)
    return gz


class ServerProc:
    def __init__(self, proc: subprocess.Popen, port: int, trace_dir: Path) -> None:
        self.proc, self.port, self.trace_dir = proc, port, trace_dir

    @classmethod
    def launch(cls, module: str, cfg: dict, cfg_path: Path, trace_dir: Path) -> ServerProc:
        """Start ``python -m module cfg_path`` (a test server) and wait for its ``PORT n``."""
        cfg_path.write_text(json.dumps(cfg))
        proc = subprocess.Popen([sys.executable, "-m", module, str(cfg_path)], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"{module} did not start: {line!r}"
        return cls(proc, int(line.split()[1]), trace_dir)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def vllm_server(tmp_path: Path) -> Iterator[Callable[..., ServerProc]]:
    """Factory: start the test server with config overrides; every server is stopped after."""
    started: list[ServerProc] = []

    def start(traces: list[Path] | None = None, **overrides) -> ServerProc:
        trace_dir = tmp_path / f"traces-{len(started)}"
        trace_dir.mkdir()
        cfg = {"version": "0.16.0", "model": MODEL, "max_model_len": 8192, "profiler": True,
               "trace_dir": str(trace_dir), "trace_sources": [str(p) for p in traces or []],
               "flush_delay_s": 0.6, "token_delay_s": 0.002, **overrides}  # fmt: skip
        server = ServerProc.launch("tests.vllm.server", cfg,
                                   tmp_path / f"server-{len(started)}.json", trace_dir)  # fmt: skip
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()
