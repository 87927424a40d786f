"""Fuzzing sglang-bench's import (issue 60, tests/fuzz.py): `sglang.bench_serving
--output-file` JSONL of every era (tests/sglang/era_fixtures.py), mutated; every file
commits whole or is refused in one line, the store untouched."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given

from tests.fuzz import FuzzStore, fuzz_settings, mutated
from tests.helpers import run_in_process
from tests.sglang import era_fixtures as eras

BASE = "\n".join(eras.ERAS.values()).encode() + b"\n"
_names = itertools.count()


@pytest.fixture(scope="module")
def where(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-sglang")


@pytest.fixture(scope="module")
def store(where: Path) -> FuzzStore:
    """The store, made by importing the input unmutated (it must commit)."""
    fs = FuzzStore(where / "stepscope.duckdb")
    path = where / "base.jsonl"
    path.write_bytes(BASE)
    warm = run_in_process(fs.path, "sglang-bench", "--results", str(path), "--model", "m")
    assert warm.code == 0, warm.stderr
    return fs


@fuzz_settings()
@given(content=mutated(BASE))
def test_sglang_bench_import_fuzzed(where: Path, store: FuzzStore, content: bytes) -> None:
    path = where / f"{next(_names)}-results.jsonl"
    path.write_bytes(content)
    store.counts()
    res = run_in_process(store.path, "sglang-bench", "--results", str(path), "--model", "m",
                         "--server-args", "--tp 8", "--json")  # fmt: skip
    store.check(path, res, "serving_bench")
