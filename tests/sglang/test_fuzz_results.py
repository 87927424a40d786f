"""Fuzzing sglang-bench's import (issue 60, tests/fuzz.py): `sglang.bench_serving
--output-file` JSONL of every era (tests/sglang/era_fixtures.py), mutated; every file
commits whole or is refused in one line, the store untouched."""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.fuzz import FuzzStore, fuzz_settings, import_mutated, mutated, warm_store
from tests.sglang import era_fixtures as eras

BASE = "\n".join(eras.ERAS.values()).encode() + b"\n"
VERB = ("sglang-bench", "--results", "{file}", "--model", "m", "--server-args", "--tp 8")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> FuzzStore:
    return warm_store(tmp_path_factory.mktemp("fuzz-sglang"), "results.jsonl", BASE, *VERB)


@fuzz_settings()
@given(content=mutated(BASE))
def test_sglang_bench_import_fuzzed(store: FuzzStore, content: bytes) -> None:
    import_mutated(store, "results.jsonl", content, "serving_bench", *VERB)
