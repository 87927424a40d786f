"""nccl-tests against hostile and impossible files (issue 60): one line naming the file (and
the row and field), exit 1, nothing stored; never a hang, never an internal error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.comm import nccl_samples as samples
from tests.helpers import one_line, query, run_in_process, run_on_fifo


def _refused(store: Path, path: Path, *words: str) -> None:
    res = run_in_process(store, "nccl-tests", str(path))
    line = one_line(res.stderr)
    assert res.code == 1 and str(path) in line and all(w in line for w in words), line
    assert "internal error" not in line and not store.exists()


def test_a_fifo_is_named_never_waited_on(tmp_path: Path, store_path: Path) -> None:
    fifo = tmp_path / "all_reduce.log"
    res = run_on_fifo(fifo, store_path, "nccl-tests", str(fifo))
    line = one_line(res.stderr)
    assert res.code == 1 and "FIFO" in line and str(fifo) in line


def test_a_folder_where_the_log_belongs_is_named(tmp_path: Path, store_path: Path) -> None:
    _refused(store_path, tmp_path, "a folder")


def test_json_nested_100000_levels_isone_line(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(store_path, path, "nested deeper")


@pytest.mark.parametrize(("old", "new", "words"), [
    ("  740.50", "1e15", ("row 3", "out-of-place time", "is over")),
    ("  181.25", " -181.25", ("row 3", "algbw", "is negative")),
])  # fmt: skip
def test_an_impossible_figure_in_a_log_is_refused(tmp_path: Path, store_path: Path, old: str,
                                                  new: str, words: tuple[str, ...]) -> None:  # fmt: skip
    assert old in samples.V2_18
    path = tmp_path / "all_reduce.log"
    path.write_text(samples.V2_18.replace(old, new, 1))
    _refused(store_path, path, *words)


@pytest.mark.parametrize(("edit", "words"), [
    (lambda d: d["results"][0]["out_of_place"].update(time=1e15), ("row 1", "time", "is over")),
    (lambda d: d["results"][1]["in_place"].update(bus_bw=-3.0), ("row 2", "busbw", "negative")),
    (lambda d: d["config"].update(nthreads="many"), ("malformed entry",)),
    (lambda d: d["results"][0].pop("size"), ("malformed entry",)),
    (lambda d: d["config"].update(iterations=1e30), ("iters", "is over")),
])  # fmt: skip
def test_an_impossible_or_malformed_json_report_is_refused(tmp_path: Path, store_path: Path,
                                                           edit, words: tuple[str, ...]) -> None:  # fmt: skip
    doc = json.loads(samples.json_report())
    edit(doc)
    path = tmp_path / "all_gather.json"
    path.write_text(json.dumps(doc))
    _refused(store_path, path, *words)


def test_the_same_file_twice_is_one_run(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "all_reduce.log"
    path.write_text(samples.V2_18)
    res = run_in_process(store_path, "nccl-tests", str(path), str(path), str(tmp_path / "." / path.name))
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT count(*) FROM runs") == [(1,)]
    assert res.stderr.count("committed run") == 1
