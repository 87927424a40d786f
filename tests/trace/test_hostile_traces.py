"""trace against hostile and impossible files (issue 60), on the fixtures' real vLLM MI300X
decode trace with one thing changed: one line naming the file and the event, exit 1, nothing
stored; no event dropped silently, no internal error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, one_line, query, run_in_process, run_on_fifo

REAL = FIXTURES / "traces" / "tracelens" / "vllm_mi300x_decode_fullgraph_bs32.json.gz"
pytestmark = pytest.mark.skipif(not REAL.is_file(), reason="tests/fixtures not present")


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(gzip.decompress(REAL.read_bytes()))


def _kernels(d: dict) -> list[dict]:
    return [e for e in d["traceEvents"] if e.get("cat") == "kernel"]


def _write(tmp_path: Path, d: dict, name: str = "rank0.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(d))  # json.dumps writes NaN and Infinity bare, as Python does
    return path


def _refused(store: Path, path: Path, *words: str) -> str:
    res = run_in_process(store, "trace", str(path))
    line = one_line(res.stderr)
    assert res.code == 1 and str(path) in line and all(w in line for w in words), line
    assert "internal error" not in line and not store.exists()
    return line


@pytest.mark.parametrize(("value", "words"), [
    (float("nan"), ("'dur' NaN",)),
    (float("inf"), ("dur", "infinite")),
    (1e15, ("dur 1e+15 us is over",)),
    (-4.0, ("negative",)),
    (1e6, ("longer than the rest of its trace",)),  # a second, in an 18.8 ms profile
])  # fmt: skip
def test_an_impossible_kernel_duration_is_refused(doc: dict, tmp_path: Path, store_path: Path,
                                                  value: float, words: tuple[str, ...]) -> None:  # fmt: skip
    d = json.loads(json.dumps(doc))
    _kernels(d)[7]["dur"] = value
    _refused(store_path, _write(tmp_path, d), *words)


def test_timestamps_near_3e18_are_refused(doc: dict, tmp_path: Path, store_path: Path) -> None:
    d = json.loads(json.dumps(doc))
    for e in d["traceEvents"]:
        if isinstance(e.get("ts"), float | int):
            e["ts"] += 3e18
    _refused(store_path, _write(tmp_path, d), "ts", "past the year 2100")


def test_a_base_time_past_2100_is_refused(doc: dict, tmp_path: Path, store_path: Path) -> None:
    d = json.loads(json.dumps(doc))
    d["baseTimeNanoseconds"] = 10**30
    _refused(store_path, _write(tmp_path, d), "baseTimeNanoseconds", "past the year 2100")


def test_a_broken_event_mid_file_is_said_not_dropped_with_the_rest(doc: dict, tmp_path: Path,
                                                                   store_path: Path) -> None:  # fmt: skip
    path = _write(tmp_path, doc)
    text = path.read_text()
    k = _kernels(doc)[200]
    at = text.index(json.dumps(k["name"]))  # that kernel's name, then its broken duration
    cut = text.index('"dur"', at)
    path.write_text(text[:cut] + '"dur": 4.4.4' + text[text.index(",", cut):])
    _refused(store_path, path, "invalid JSON in traceEvents")


def test_json_nested_100000_levels_is_one_line(doc: dict, tmp_path: Path, store_path: Path) -> None:
    path = _write(tmp_path, doc)
    text = path.read_text()
    cut = text.index('"args"', text.index('"cat": "kernel"'))
    path.write_text(text[:cut] + '"deep": ' + "[" * 100_000 + "]" * 100_000 + ", " + text[cut:])
    _refused(store_path, path, "invalid JSON in traceEvents")


def test_a_fifo_is_named_never_waited_on(tmp_path: Path, store_path: Path) -> None:
    fifo = tmp_path / "rank0.json"
    res = run_on_fifo(fifo, store_path, "trace", str(fifo))
    assert res.code == 1 and "FIFO" in one_line(res.stderr)


def test_the_real_trace_still_imports_whole(doc: dict, tmp_path: Path, store_path: Path) -> None:
    path = _write(tmp_path, doc)
    res = run_in_process(store_path, "trace", str(path), str(path))  # named twice: one rank
    assert res.code == 0, res.stderr
    gpu = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert query(store_path, "SELECT count(*), sum(kernels) FROM trace_ranks") == [(1, len(gpu))]
