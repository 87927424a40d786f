"""Fuzzing vllm-bench's import (issue 60, tests/fuzz.py): `--save-result` JSON and a log of
printed result blocks in vLLM's shapes (tests/vllm/bench_fixtures.py, printed_fixtures.py),
mutated; every file commits whole or is refused in one line, the store untouched."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import FuzzStore, fuzz_settings, mutated
from tests.helpers import run_in_process
from tests.vllm import bench_fixtures
from tests.vllm import printed_fixtures as pf

BASES = {
    "result.json": json.dumps(bench_fixtures.result(8)).encode(),
    "bench.log": (pf.namespace("moonshotai/Kimi-K2.5", 4) + "\n" + pf.v10(pf.case(4))).encode(),
}
_names = itertools.count()


@pytest.fixture(scope="module")
def where(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-vllm")


@pytest.fixture(scope="module")
def store(where: Path) -> FuzzStore:
    """The store, made by importing the input unmutated (it must commit)."""
    fs = FuzzStore(where / "stepscope.duckdb")
    path = where / "base.json"
    path.write_bytes(BASES["result.json"])
    warm = run_in_process(fs.path, "vllm-bench", "--results", str(path))
    assert warm.code == 0, warm.stderr
    return fs


@fuzz_settings()
@given(data=st.data())
def test_vllm_bench_import_fuzzed(where: Path, store: FuzzStore, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(BASES)))
    path = where / f"{next(_names)}-{name}"
    path.write_bytes(data.draw(mutated(BASES[name])))
    store.counts()
    res = run_in_process(store.path, "vllm-bench", "--results", str(path), "--server-args", "-tp 8",
                         "--json")  # fmt: skip
    store.check(path, res, "serving_bench")
