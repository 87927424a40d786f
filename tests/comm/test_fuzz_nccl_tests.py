"""Fuzzing nccl-tests' import (issue 60, tests/fuzz.py): text logs of two eras with real-log
noise and a -J JSON report (tests/comm/nccl_samples.py), mutated; every file commits whole
or is refused in one line, the store untouched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.comm import nccl_samples as samples
from tests.fuzz import FuzzStore, fuzz_settings, import_mutated, mutated, warm_store

BASES = {"all_reduce.log": samples.NCCL_INFO.encode(), "old_era.log": samples.OLD_ERA.encode(),
         "all_gather.json": samples.json_report().encode()}  # fmt: skip
VERB = ("nccl-tests", "{file}")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> FuzzStore:
    return warm_store(tmp_path_factory.mktemp("fuzz-nccl"), "all_reduce.log",
                      BASES["all_reduce.log"], *VERB)  # fmt: skip


@fuzz_settings()
@given(data=st.data())
def test_nccl_tests_import_fuzzed(store: FuzzStore, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(BASES)))
    import_mutated(store, name, data.draw(mutated(BASES[name])), "comm_results", *VERB)
