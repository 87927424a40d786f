"""Reading large traces on several processes (collectors/trace/readers/kineto_split.py) gives exactly what
one pass gives: the same RawTrace field for field and the same ingested tables, on every
real fixture, cut into many small chunks so that every process parses a share of each
file (two processes, and four as on a many-core host)."""

from __future__ import annotations

import functools
import gzip

import pytest

from collectors.core.errors import InputError
from collectors.trace import ingest
from collectors.trace.readers import kineto as reader
from collectors.trace.readers import kineto_scan as scanner
from collectors.trace.readers import kineto_split as split
from collectors.trace.readers import rank_files as ranks
from tests.trace.conftest import TRACES, fixture

BLOCK = 4096  # bytes read at a time: ~60 KB of JSON per chunk, dozens of chunks per file


def _fixtures() -> list[str]:
    found = sorted(str(p.relative_to(TRACES)) for p in TRACES.glob("*/*.json.gz"))
    return found or ["tracelens/h100_qwen1.5_0.5b.json.gz"]  # absent: that test skips


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("rel", _fixtures())
def test_several_processes_read_what_one_pass_reads(rel, workers):
    path = fixture(rel)
    one = reader.read_trace(path, parallel=False)
    two = reader.read_trace(path, parallel=workers, block=BLOCK)
    assert two == one
    assert len(one.g_ts) > 0 and one.events_kept > 0


def test_both_halves_take_a_share_and_merge_in_order():
    """The halves in-process: each parses alternate chunks; the merge restores one pass."""
    path = fixture("tracelens/h100_qwen1.5_0.5b.json.gz")
    mine, theirs = scanner.Part(mine=0), scanner.Part(mine=1)
    a, used = scanner.scan(path, None, False, mine, BLOCK)
    b, _ = scanner.scan(path, None, False, theirs, BLOCK)
    assert len(mine.marks) > 10 and len(theirs.marks) > 10
    assert 0 < len(a.g_ts) < len(a.g_ts) + len(b.g_ts) and len(b.g_ts) > 0
    assert a.names != b.names  # each numbered its names in its own order
    one, one_used = scanner.scan(path, None, False)
    assert split.merge([(a, mine.marks), (b, theirs.marks)]) == one and used == one_used


def test_four_shares_merge_in_order():
    path = fixture("tracelens/h100_qwen1.5_0.5b.json.gz")
    parts = [scanner.Part(mine=k, parts=4) for k in range(4)]
    shares = [(scanner.scan(path, None, False, part, BLOCK)[0], part.marks) for part in parts]
    assert all(
        len(p.marks) > 5 and len(raw.g_ts) > 0 for p, (raw, _) in zip(parts, shares, strict=True)
    )
    assert split.merge(shares) == scanner.scan(path, None, False)[0]


def test_truncated_tmp_and_plain_json(truncated_tmp, tmp_path):
    plain = tmp_path / "h100.json"
    plain.write_bytes(gzip.decompress(fixture("tracelens/h100_qwen1.5_0.5b.json.gz").read_bytes()))
    for path in (truncated_tmp, plain):
        one = reader.read_trace(path, parallel=False)
        assert reader.read_trace(path, parallel=True, block=BLOCK << 4) == one
    assert one.partial is False and reader.read_trace(truncated_tmp).partial is True


def _one_process(monkeypatch) -> None:
    """The reference: every file read here, in one pass each."""
    monkeypatch.setattr(ranks, "read_all", lambda files: ((f, None) for f in files))
    monkeypatch.setattr(ingest, "read_trace", functools.partial(reader.read_trace, parallel=False))


def _same(one: ingest.TraceIngest, two: ingest.TraceIngest) -> None:
    assert set(two.tables) == set(one.tables)
    for name, table in one.tables.items():
        assert two.tables[name].to_arrow().equals(table.to_arrow()), name
    assert two.summary == one.summary and two.digest == one.digest
    assert two.run_info == one.run_info and two.warnings == one.warnings


@pytest.mark.parametrize("rel", _fixtures())
def test_ingested_tables_are_identical_chunk_split(monkeypatch, rel):
    path = fixture(rel)
    split_read = functools.partial(reader.read_trace, parallel=True, block=BLOCK)
    with monkeypatch.context() as m:
        _one_process(m)
        one = ingest.ingest_traces([path])
        m.setattr(ingest, "read_trace", split_read)
        two = ingest.ingest_traces([path])
    _same(one, two)


@pytest.mark.parametrize("workers", [1, 3])
def test_ingested_tables_are_identical_file_split(monkeypatch, tmp_path, workers):
    """Several ranks: workers read some of the files (and skip what one pass skips); three
    workers for four files is what a many-core GPU host gets."""
    (tmp_path / "notes.json").write_text('{"not": "a trace"}')
    for rel in ("hta/sampled_rank-0.json.gz", "hta/sampled_rank-1.json.gz",
                "tracelens/h100_qwen1.5_0.5b.json.gz"):  # fmt: skip
        src = fixture(rel)
        (tmp_path / src.name.replace("h100_qwen1.5_0.5b", "x_rank2")).write_bytes(src.read_bytes())
    monkeypatch.setattr(ranks, "spare_cores", lambda: workers)  # whatever the box's load
    started: list[str] = []
    real_start = ranks.start_worker
    monkeypatch.setattr(ranks, "start_worker",
                        lambda module, arg: started.append(arg) or real_start(module, arg))  # fmt: skip
    files, _ = ingest.find_trace_files([tmp_path])
    assert len(files) == 4
    got = list(ranks.read_all(files))
    assert len(started) == workers  # one share of the files per worker, one kept here
    assert [f for f, _ in got] == files and sum(raw is None for _, raw in got) == 1
    two = ingest.ingest_traces([tmp_path])
    with monkeypatch.context() as m:
        _one_process(m)
        one = ingest.ingest_traces([tmp_path])
    _same(one, two)
    assert any("notes.json" in w for w in one.warnings) and len(one.summary["ranks"]) == 3


def test_a_bad_event_in_the_workers_share_is_the_same_error(tmp_path):
    """The worker fails, the file is read again in one pass: the same line, same index."""
    text = gzip.decompress(fixture("tracelens/h100_qwen1.5_0.5b.json.gz").read_bytes())
    at = text.index(b'"cat": "kernel"', len(text) * 3 // 4)
    dur = text.index(b'"dur": ', at)
    bad = tmp_path / "bad.json"
    bad.write_bytes(text[:dur] + b'"dur": -5, "was": ' + text[dur + 7 :])
    with pytest.raises(InputError) as one:
        reader.read_trace(bad, parallel=False)
    for block, workers in ((BLOCK << 4, 1), (BLOCK << 5, 1), (BLOCK << 4, 3)):
        with pytest.raises(InputError) as two:  # the bad event in any process's share
            reader.read_trace(bad, parallel=workers, block=block)
        assert str(two.value) == str(one.value)
    assert "negative duration" in str(one.value)


@pytest.mark.parametrize(("cores", "load", "spare"), [
    (2, 0.9, 1), (2, 1.4, 1), (2, 1.5, 0), (2, 1.6, 0), (2, 0.0, 1), (1, 0.0, 0),
    (64, 10.0, 54), (64, 0.0, 63), (64, 70.0, 0),
])  # fmt: skip
def test_workers_follow_the_idle_cores(monkeypatch, cores, load, spare):
    monkeypatch.setattr(split, "cores", lambda: cores)
    monkeypatch.setattr(split.os, "getloadavg", lambda: (load, 0.0, 0.0))
    assert split.spare_cores() == spare


def test_workers_follow_the_file_size_and_the_idle_cores(monkeypatch):
    path = fixture("tracelens/sglang_qwen3_8b_decode.json.gz")
    assert split.workers_for(path) == 0  # 37 KB
    monkeypatch.setattr(split, "MIN_JSON_BYTES", 1)
    monkeypatch.setattr(split, "cores", lambda: 2)
    monkeypatch.setattr(split.os, "getloadavg", lambda: (0.9, 0.0, 0.0))
    assert split.workers_for(path) == 1
    monkeypatch.setattr(split.os, "getloadavg", lambda: (1.6, 0.0, 0.0))  # the box is busy
    assert split.workers_for(path) == 0
    monkeypatch.setattr(split, "cores", lambda: 1)
    monkeypatch.setattr(split.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert split.workers_for(path) == 0
    monkeypatch.setattr(split, "cores", lambda: 64)  # a GPU host: capped, each inflates all
    assert split.workers_for(path) == split.MAX_WORKERS
    monkeypatch.setattr(split, "MIN_JSON_BYTES", path.stat().st_size * 12 // 3)
    assert split.workers_for(path) == 3  # one per MIN_JSON_BYTES of (estimated) JSON


@pytest.mark.parametrize("worker", ["cannot start", "answers garbage"])
def test_a_worker_that_fails_leaves_the_one_pass_result(monkeypatch, tmp_path, worker):
    import subprocess
    import sys

    def start(_module: str, _arg: str) -> subprocess.Popen:
        if worker == "cannot start":
            raise OSError("no interpreter")
        return subprocess.Popen([sys.executable, "-c", "print('not a pickle')"],
                                stdout=subprocess.PIPE)  # fmt: skip

    monkeypatch.setattr(split, "start_worker", start)
    monkeypatch.setattr(ranks, "start_worker", start)
    monkeypatch.setattr(ranks, "spare_cores", lambda: 1)
    path = fixture("tracelens/h100_qwen1.5_0.5b.json.gz")
    assert reader.read_trace(path, parallel=True, block=BLOCK) == reader.read_trace(
        path, parallel=False
    )
    files = [fixture("hta/sampled_rank-0.json.gz"), fixture("hta/sampled_rank-1.json.gz")]
    got = dict(ranks.read_all(files))  # None: the caller reads the file itself
    first = None if worker == "cannot start" else reader.read_trace(files[0], parallel=False)
    assert got[files[1]] is None and got[files[0]] == first
