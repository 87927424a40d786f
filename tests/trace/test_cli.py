"""``python -m collectors trace`` as a user runs it: real CLI, real store files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers import query, run_cli
from tests.trace.conftest import fixture
from tests.trace.synth import decode_step_trace

ITEM7 = {
    "run_id",
    "ranks",
    "steps",
    "partial",
    "categories",
    "per_rank",
    "committed",
    "outside_steps",
    "comm_sources",
    "gpu_events",
    "graph_mode",
    "step_source",
    "floors",  # issue 42: every step category against its floor (tests/trace/test_floor*.py)
}


def test_json_summary_and_reimport_is_a_no_op(store_path):
    a, b = fixture("hta/sampled_rank-0.json.gz"), fixture("hta/sampled_rank-1.json.gz")
    res = run_cli(store_path, "trace", str(a), str(b), "--label", "hta sample", "--json")
    assert res.code == 0, res.stderr
    out = res.json
    assert set(out) == ITEM7 and out["committed"] is True
    assert out["ranks"] == [0, 1] and out["steps"] == 2 and out["partial"] is False
    assert set(out["per_rank"]) == {"0", "1"}
    assert set(out["per_rank"]["0"]) == {"busy_us", "idle_us", "span_us", "exposed_comm_us",
                                         "mean_step_wall_us"}  # fmt: skip
    assert out["categories"]["all_to_all"]["calls"] == 8
    assert all(set(v) == {"calls", "total_us"} for v in out["categories"].values())
    run_id = out["run_id"]
    runs = query(store_path, "SELECT verb, status, label, nccl, gpu_count, args FROM runs")
    assert runs[0][:5] == ("trace", "ok", "hta sample", None, 2)
    args = json.loads(runs[0][5])
    assert args["world_size"] == 128 and args["backend"] == "nccl"
    cats = query(store_path, "SELECT category, calls_per_step FROM v_trace_categories "
                 "WHERE run_id = ? AND category = 'all_to_all'", [run_id])  # fmt: skip
    assert cats == [("all_to_all", 2.0)]  # 8 calls over 2 ranks x 2 steps
    again = run_cli(store_path, "trace", str(b), str(a), "--json")
    assert again.code == 0 and again.json["run_id"] == run_id
    assert "already in the store" in again.stderr
    assert query(store_path, "SELECT count(*) FROM trace_ranks") == [(2,)]


def test_directory_import_with_device_and_nccl_recorded(store_path, tmp_path):
    src = fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")
    d = tmp_path / "traces"
    d.mkdir()
    (d / "dp0_pp0_tp0_dcp0_ep0_rank0.123.pt.trace.json.gz").write_bytes(src.read_bytes())
    (d / "config.json").write_text('{"model": "x"}')  # not a trace: skipped with a warning
    res = run_cli(store_path, "trace", str(d), "--json")
    assert res.code == 0, res.stderr
    assert "skipped" in res.stderr and "config.json" in res.stderr
    assert query(store_path, "SELECT nccl, status FROM runs") == [("2.26.6", "ok")]
    got = query(store_path, "SELECT rank, rank_source, steps, step_source FROM v_trace_ranks")
    assert got == [(0, "distributedInfo", 1, "vllm")]


def test_partial_tmp_is_committed_as_partial(store_path, truncated_tmp):
    res = run_cli(store_path, "trace", str(truncated_tmp), "--json")
    assert res.code == 0, res.stderr
    assert res.json["partial"] is True and "partial" in res.stderr
    status, message = query(store_path, "SELECT status, message FROM runs")[0]
    assert status == "partial" and truncated_tmp.name in message


def _garbage_gz(tmp: Path) -> Path:
    good = decode_step_trace(tmp / "ok.json.gz").read_bytes()
    half = len(good) // 2
    out = tmp / "bad.json.gz"
    out.write_bytes(good[:half] + b"\x00garbage\xff" * 8 + good[half + 80 :])
    return out


def _h100_json() -> bytes:
    return gzip.decompress(fixture("tracelens/h100_qwen1.5_0.5b.json.gz").read_bytes())


def _cut_before_any_event(tmp: Path) -> Path:
    """Issue 43 item 7: a .json.gz cut inside its first event: 0 complete events (this
    used to commit a run with 0 GPU events, exit 0)."""
    data = _h100_json()
    out = tmp / "h100_rank0.pt.trace.json.gz"
    out.write_bytes(gzip.compress(data[: data.index(b'"traceEvents"') + 200]))
    return out


def _cut_before_any_kernel(tmp: Path) -> Path:
    """Cut at half its JSON: 2,000-odd CPU ops, no kernel yet (the first is at 67%)."""
    data = _h100_json()
    out = tmp / "h100_rank0.pt.trace.json.tmp"
    out.write_bytes(data[: len(data) // 2])
    return out


def _gzip_header_only(tmp: Path) -> Path:
    """A gzip stream cut before its first inflated byte (this used to say "only
    whitespace")."""
    out = tmp / "h100_rank0.pt.trace.json.gz"
    out.write_bytes(gzip.compress(_h100_json())[:30])
    return out


def _damaged_gzip_tail(tmp: Path) -> Path:
    """The last deflate block damaged: the inflated tail fails as JSON before the stream's
    own check is reached (this used to say "invalid JSON in traceEvents")."""
    good = gzip.compress(_h100_json())
    out = tmp / "h100_rank0.pt.trace.json.gz"
    out.write_bytes(good[:-100] + bytes(b ^ 0xFF for b in good[-100:]))
    return out


def _write(name: str, content: str):
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_text(content)
        return path

    return make


_EV = '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5.0'
BAD = [
    ("not JSON", _write("a.json", "Traceback (most recent call last):"), "not valid JSON"),
    ("wrong top level", _write("a.json", "[1, 2, 3]"), "top level is a JSON array"),
    ("no traceEvents", _write("a.json", '{"schemaVersion": 1}'), "without traceEvents"),
    ("missing fields", _write("a.json", '{"traceEvents": [' + _EV + "}]}"), "lacks a numeric"),
    ("negative duration", _write("a.json", '{"traceEvents": [' + _EV + ', "dur": -1.5}]}'),
     "negative duration"),
    ("garbage in gz", _garbage_gz, "corrupt gzip"),
    ("gz cut before any event", _cut_before_any_event, "no complete GPU event"),
    ("gz cut before any data", _gzip_header_only, "truncated gzip"),
    ("cut before any kernel", _cut_before_any_kernel, "no complete GPU event"),
    ("damaged gz tail", _damaged_gzip_tail, "corrupt gzip"),
    ("empty file", _write("a.json", ""), "empty"),
    ("no events", _write("a.json", '{"traceEvents": []}'), "no events in traceEvents"),
    ("died before its first event", _write("a.json.tmp", '{"traceEvents": [\n'),
     "no events in traceEvents"),
    ("empty directory", lambda tmp: (tmp / "d").mkdir() or tmp / "d", "no trace files"),
    ("missing path", lambda tmp: tmp / "nope.json", "no such file"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "make", "reason"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_exit_1_nothing_committed(store_path, tmp_path, case, make, reason):
    path = make(tmp_path)
    res = run_cli(store_path, "trace", str(path))
    assert res.code == 1, (case, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert str(path) in lines[0] and reason in lines[0]
    assert "Traceback" not in res.stderr
    assert not store_path.exists() or query(store_path, "SELECT count(*) FROM runs") == [(0,)]


def test_a_rank_file_with_no_events_is_skipped_with_a_warning(store_path, tmp_path):
    decode_step_trace(tmp_path / "rank0.json", rank=0)
    (tmp_path / "rank1.json").write_text('{"traceEvents": []}')
    res = run_cli(store_path, "trace", "--json", str(tmp_path))
    assert res.code == 0, res.stderr
    assert f"skipped {tmp_path / 'rank1.json'}: no events in traceEvents" in res.stderr
    assert res.json["ranks"] == [0]


def test_duplicate_rank_is_an_error(store_path, tmp_path):
    a = decode_step_trace(tmp_path / "a.json", rank=0)
    b = tmp_path / "b.json.gz"
    b.write_bytes(gzip.compress(decode_step_trace(tmp_path / "c.json", rank=0, steps=2)
                                .read_bytes()))  # fmt: skip
    res = run_cli(store_path, "trace", str(a), str(b))
    assert res.code == 1 and "both claim rank 0" in res.stderr
    assert not store_path.exists()


def test_dry_run_imports_only_the_trace_path(tmp_path):
    """Start-up cost (issue 12): a ``trace`` that does not commit imports neither DuckDB nor
    the other verbs' collectors, nor numpy.ma (collectors/trace/npx.py); the full ``--help``
    still lists every verb (test_cli)."""
    import subprocess
    import sys

    trace = fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")
    probe = (
        "import sys\nfrom collectors.cli import main\n"
        f"code = main(['trace', '--dry-run', '--store', {str(tmp_path / 's.duckdb')!r}, "
        f"{str(trace)!r}])\n"
        "print(code, *sorted(m for m in sys.modules if m in ('duckdb', 'numpy.ma') or m.startswith("
        "('collectors.serving', 'collectors.serving.vllm', 'collectors.serving.sglang', 'collectors.comm'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], check=True)  # fmt: skip
    assert out.stdout.split() == ["0"], out.stdout + out.stderr


def test_a_committed_small_import_never_loads_pandas_or_pyarrow(tmp_path):
    """Start-up cost (issue 12): pandas costs ~0.35 s to import, and duckdb loads it for any
    bound Python value; the commit reads every value from files instead (store/commit.py).
    A small trace's tables are spooled as JSON straight from numpy (store/spool/bundle.py), so
    neither process imports pyarrow (~40 ms with pyarrow.parquet) either."""
    import subprocess
    import sys

    trace = fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")
    store = tmp_path / "s.duckdb"
    probe = (
        "import sys\nfrom collectors.cli import main\n"
        f"code = main(['trace', '--store', {str(store)!r}, {str(trace)!r}])\n"
        "print(code, 'pandas' in sys.modules, 'pyarrow.compute' in sys.modules)"
    )
    for _ in range(2):  # a new store (migrations), then a store that exists
        # -X importtime: every module the process imports is named on stderr
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", probe],
                             capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[2], check=True)  # fmt: skip
        assert out.stdout.split() == ["0", "False", "False"], out.stdout + out.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
                    if line.startswith("import time:")}  # fmt: skip
        assert "duckdb" in imported and "numpy" in imported, sorted(imported)
        assert not {m.split(".")[0] for m in imported} & {"pandas", "pyarrow"}, sorted(imported)
    ((run_id, args),) = query(store, "SELECT run_id, args FROM runs")
    assert run_id.startswith("trace-") and json.loads(args)["paths"] == [str(trace)]
    assert query(store, "SELECT count(*) FROM trace_kernels WHERE run_id = ?", [run_id]) == [(434,)]
