"""Fuzzing nccl-tests' import (issue 60, tests/fuzz.py): text logs of two eras with real-log
noise and a -J JSON report (tests/comm/nccl_samples.py), mutated; every file commits whole
or is refused in one line, the store untouched."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.comm import nccl_samples as samples
from tests.fuzz import FuzzStore, fuzz_settings, mutated
from tests.helpers import run_in_process

BASES = {"all_reduce.log": samples.NCCL_INFO.encode(), "old_era.log": samples.OLD_ERA.encode(),
         "all_gather.json": samples.json_report().encode()}  # fmt: skip
_names = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> FuzzStore:
    where = tmp_path_factory.mktemp("fuzz-nccl")
    fs = FuzzStore(where / "stepscope.duckdb")
    path = where / "all_reduce.log"
    path.write_bytes(BASES["all_reduce.log"])
    warm = run_in_process(fs.path, "nccl-tests", str(path))
    assert warm.code == 0, warm.stderr
    return fs


@fuzz_settings()
@given(data=st.data())
def test_nccl_tests_import_fuzzed(store: FuzzStore, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(BASES)))
    path = store.path.parent / f"{next(_names)}-{name}"
    path.write_bytes(data.draw(mutated(BASES[name])))
    store.counts()
    res = run_in_process(store.path, "nccl-tests", str(path), "--json")
    store.check(path, res, "comm_results")
