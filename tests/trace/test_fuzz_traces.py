"""Fuzzing trace's import (issue 60, tests/fuzz.py): the fixtures' real vLLM MI300X Kineto
trace (its header, first 400 events and trailer, as plain JSON and as gzip) and a real Nsight
Systems export, mutated; every file commits whole or is refused in one line, the store
untouched."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import FuzzStore, fuzz_settings, import_mutated, mutated, warm_store
from tests.helpers import FIXTURES

KINETO = FIXTURES / "traces" / "tracelens" / "vllm_mi300x_decode_fullgraph_bs32.json.gz"
NSYS = FIXTURES / "nsys" / "pipit_saxpy_mpi_nsys2022.2.sqlite"
pytestmark = pytest.mark.skipif(not (KINETO.is_file() and NSYS.is_file()),
                                reason="tests/fixtures not present")  # fmt: skip


def _bases() -> dict[str, bytes]:
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][:400]
    text = json.dumps(doc, indent=1).encode()  # Kineto writes one key per line, indented
    return {"rank0.json": text, "rank0.json.gz": gzip.compress(text, 1),
            "report.sqlite": NSYS.read_bytes()}  # fmt: skip


@pytest.fixture(scope="module")
def bases() -> dict[str, bytes]:
    return _bases()


VERB = ("trace", "{file}")


@pytest.fixture(scope="module")
def store(tmp_path_factory, bases: dict[str, bytes]) -> FuzzStore:
    return warm_store(tmp_path_factory.mktemp("fuzz-trace"), "rank0.json", bases["rank0.json"],
                      *VERB)  # fmt: skip


@fuzz_settings()
@given(data=st.data())
def test_trace_import_fuzzed(store: FuzzStore, bases: dict[str, bytes],
                             data: st.DataObject) -> None:  # fmt: skip
    name = data.draw(st.sampled_from(sorted(bases)))
    import_mutated(store, name, data.draw(mutated(bases[name])), "trace_ranks", *VERB)
