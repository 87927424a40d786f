"""Fuzzing `import` (issue 60, tests/fuzz.py): a real `export` of a vllm-bench run (a .zip of
Parquet tables and a manifest), mutated; every file commits whole or is refused in one line,
the store untouched."""

from __future__ import annotations

import json
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import FuzzStore, fuzz_settings, import_mutated, mutated, warm_store
from tests.helpers import run_in_process
from tests.vllm import bench_fixtures


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> dict[str, bytes]:
    """The export's bytes, and its manifest alone in a zip with the tables stored as they
    are (so that JSON-aware mutations reach the manifest)."""
    where = tmp_path_factory.mktemp("fuzz-export")
    store = where / "source.duckdb"
    (path,) = bench_fixtures.write_sweep(where / "sweep", levels=(4,))
    made = run_in_process(store, "vllm-bench", "--results", str(path), "--json")
    assert made.code == 0, made.stderr
    out = where / "run.zip"
    assert run_in_process(store, "export", made.json["run_id"], "--out", str(out)).code == 0
    stored = where / "stored.zip"
    with zipfile.ZipFile(out) as src, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "manifest.json":
                data = json.dumps(json.loads(data), indent=1).encode()
            dst.writestr(info.filename, data)
    return {"run.zip": out.read_bytes(), "stored.zip": stored.read_bytes()}


@pytest.fixture(scope="module")
def store(tmp_path_factory, export: dict[str, bytes]) -> FuzzStore:
    return warm_store(tmp_path_factory.mktemp("fuzz-import"), "run.zip", export["run.zip"],
                      "import", "{file}")  # fmt: skip


@fuzz_settings()
@given(data=st.data())
def test_import_fuzzed(store: FuzzStore, export: dict[str, bytes], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(export)))
    import_mutated(store, name, data.draw(mutated(export[name])), "serving_bench", "import",
                   "{file}")  # fmt: skip
