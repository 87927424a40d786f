"""``expert-load --url``: drive a running SGLang server's recorder (start, load, stop, dump)
and import its dump files; the server is tests/sglang/server.py, a real HTTP server speaking
SGLang's endpoints, whose dump writes files in SGLang's format (tests/expert_load/recordings.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.expert_load import recordings as rec
from tests.helpers import query, run_cli
from tests.vllm.conftest import ServerProc

SHAPE = rec.deepseek_v3()
MODEL = "deepseek-ai/DeepSeek-V3"


@pytest.fixture
def server(tmp_path: Path):
    started: list[ServerProc] = []

    def start(**cfg) -> ServerProc:
        base = {"model": MODEL, "version": "0.5.4", "tp": 8, "ep": 8, "token_delay_s": 0.001}
        proc = ServerProc.launch("tests.sglang.server", {**base, **cfg},
                                 tmp_path / f"server-{len(started)}.json", tmp_path)  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for s in started:
        s.stop()


def test_url_records_a_stat_dump_from_the_server(tmp_path, server) -> None:
    pytest.importorskip("torch")
    counts = rec.skewed_counts(SHAPE, seed=11)
    source = rec.write_stat(tmp_path / "source.pt", counts)
    dump_dir = tmp_path / "recorder"
    dump_dir.mkdir()
    (dump_dir / "expert_distribution_recorder_1.0.pt").write_bytes(b"an older dump: not ours")
    srv = server(recorder_mode="stat", recorder_dir=str(dump_dir), recorder_files=[str(source)])
    store = tmp_path / "s.duckdb"
    res = run_cli(store, "expert-load", "--url", srv.url, "--dump-dir", str(dump_dir),
                  "--num-requests", "3", "--concurrency", "2", "--output-len", "4",
                  "--settle", "0.5", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    out = res.json
    assert out["load"]["completed"] == 3
    run_id = out["run_id"]
    meta = query(store, "SELECT model_id, recorder_mode, url, sglang_version, total_count, verb "
                 "FROM v_expert_load WHERE run_id = ?", [run_id])[0]  # fmt: skip
    assert meta == (MODEL, "stat", srv.url, "0.5.4", float(counts.sum()), "expert-load")
    grid = np.zeros_like(counts)
    for layer, expert, n in query(store, "SELECT layer, expert, count FROM v_expert_load_counts"):
        grid[layer, expert] = n
    assert (grid == counts).all()
    assert out["per_rank"]["8"]["contiguous_max_over_mean"] > out["per_rank"]["8"][
        "balanced_max_over_mean"]  # fmt: skip


def test_a_server_without_the_recorder_mode_is_one_line(tmp_path, server) -> None:
    srv = server(recorder_mode=None, recorder_dir=str(tmp_path))
    res = run_cli(tmp_path / "s.duckdb", "expert-load", "--url", srv.url, "--dump-dir",
                  str(tmp_path), "--num-requests", "1")  # fmt: skip
    assert res.code == 1 and "Traceback" not in res.stderr
    assert "--expert-distribution-recorder-mode" in res.stderr.strip().splitlines()[-1]


def test_a_dump_that_never_shows_up_here_names_the_folder(tmp_path, server) -> None:
    pytest.importorskip("torch")
    source = rec.write_stat(tmp_path / "source.pt", rec.skewed_counts(SHAPE))
    elsewhere, here = tmp_path / "server-side", tmp_path / "client-side"
    elsewhere.mkdir(), here.mkdir()
    srv = server(recorder_mode="stat", recorder_dir=str(elsewhere), recorder_files=[str(source)])
    res = run_cli(tmp_path / "s.duckdb", "expert-load", "--url", srv.url, "--dump-dir", str(here),
                  "--num-requests", "1", "--dump-timeout", "2")  # fmt: skip
    assert res.code == 1 and "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert str(here) in last and "SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR" in last
