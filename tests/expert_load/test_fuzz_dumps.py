"""Fuzzing expert-load's import (issue 60, tests/fuzz.py): SGLang's JSON logical_count form
and a stat-mode .pt dump of DeepSeek-V3 (tests/expert_load/recordings.py), mutated; every
file commits whole or is refused in one line, the store untouched."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.expert_load import recordings as rec
from tests.fuzz import FuzzStore, fuzz_settings, mutated
from tests.helpers import run_in_process

pytestmark = pytest.mark.skipif(not rec.CONFIG.is_file(), reason="tests/fixtures not present")
_names = itertools.count()


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, bytes]:
    where = tmp_path_factory.mktemp("fuzz-expert-bases")
    counts = rec.skewed_counts(rec.deepseek_v3())
    return {"counts.json": rec.write_json(where / "c.json", counts).read_bytes(),
            "recorder.pt": rec.write_stat(where / "s.pt", counts, passes=2).read_bytes()}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory, bases: dict[str, bytes]) -> FuzzStore:
    where = tmp_path_factory.mktemp("fuzz-expert")
    fs = FuzzStore(where / "stepscope.duckdb")
    path = where / "counts.json"
    path.write_bytes(bases["counts.json"])
    warm = run_in_process(fs.path, "expert-load", str(path), "--model", "deepseek-v3")
    assert warm.code == 0, warm.stderr
    return fs


@fuzz_settings()
@given(data=st.data())
def test_expert_load_import_fuzzed(store: FuzzStore, bases: dict[str, bytes],
                                   data: st.DataObject) -> None:  # fmt: skip
    name = data.draw(st.sampled_from(sorted(bases)))
    path = store.path.parent / f"{next(_names)}-{name}"
    path.write_bytes(data.draw(mutated(bases[name])))
    store.counts()
    res = run_in_process(store.path, "expert-load", str(path), "--model", "deepseek-v3",
                         "--json")  # fmt: skip
    store.check(path, res, "expert_load_counts")
