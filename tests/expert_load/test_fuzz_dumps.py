"""Fuzzing expert-load's import (issue 60, tests/fuzz.py): SGLang's JSON logical_count form
and a stat-mode .pt dump of DeepSeek-V3 (tests/expert_load/recordings.py), mutated; every
file commits whole or is refused in one line, the store untouched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.expert_load import recordings as rec
from tests.fuzz import FuzzStore, fuzz_settings, import_mutated, mutated, warm_store

pytestmark = pytest.mark.skipif(not rec.CONFIG.is_file(), reason="tests/fixtures not present")


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, bytes]:
    where = tmp_path_factory.mktemp("fuzz-expert-bases")
    counts = rec.skewed_counts(rec.deepseek_v3())
    return {"counts.json": rec.write_json(where / "c.json", counts).read_bytes(),
            "recorder.pt": rec.write_stat(where / "s.pt", counts, passes=2).read_bytes()}  # fmt: skip


VERB = ("expert-load", "{file}", "--model", "deepseek-v3")


@pytest.fixture(scope="module")
def store(tmp_path_factory, bases: dict[str, bytes]) -> FuzzStore:
    return warm_store(tmp_path_factory.mktemp("fuzz-expert"), "counts.json", bases["counts.json"],
                      *VERB)  # fmt: skip


@fuzz_settings()
@given(data=st.data())
def test_expert_load_import_fuzzed(store: FuzzStore, bases: dict[str, bytes],
                                   data: st.DataObject) -> None:  # fmt: skip
    name = data.draw(st.sampled_from(sorted(bases)))
    import_mutated(store, name, data.draw(mutated(bases[name])), "expert_load_counts", *VERB)
