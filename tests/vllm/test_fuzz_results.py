"""Fuzzing vllm-bench's import (issue 60, tests/fuzz.py): `--save-result` JSON and a log of
printed result blocks in vLLM's shapes (tests/vllm/bench_fixtures.py, printed_fixtures.py),
mutated; every file commits whole or is refused in one line, the store untouched."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import FuzzStore, fuzz_settings, import_mutated, mutated, warm_store
from tests.vllm import bench_fixtures
from tests.vllm import printed_fixtures as pf

BASES = {
    "result.json": json.dumps(bench_fixtures.result(8)).encode(),
    "bench.log": (pf.namespace("moonshotai/Kimi-K2.5", 4) + "\n" + pf.v10(pf.case(4))).encode(),
}
VERB = ("vllm-bench", "--results", "{file}", "--server-args", "-tp 8")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> FuzzStore:
    return warm_store(tmp_path_factory.mktemp("fuzz-vllm"), "result.json", BASES["result.json"],
                      *VERB)  # fmt: skip


@fuzz_settings()
@given(data=st.data())
def test_vllm_bench_import_fuzzed(store: FuzzStore, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(BASES)))
    import_mutated(store, name, data.draw(mutated(BASES[name])), "serving_bench", *VERB)
