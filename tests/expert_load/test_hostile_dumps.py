"""expert-load against hostile and impossible files (issue 60): one line naming the file,
exit 1, nothing stored; the same file twice counts once. Recordings in SGLang's own formats
(tests/expert_load/recordings.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.expert_load import recordings as rec
from tests.helpers import one_line, query, run_in_process

SHAPE = rec.deepseek_v3()
pytestmark = pytest.mark.skipif(not rec.CONFIG.is_file(), reason="tests/fixtures not present")


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return rec.skewed_counts(SHAPE)


def _refused(store: Path, path: Path, *words: str) -> None:
    res = run_in_process(store, "expert-load", str(path), "--model", "deepseek-v3")
    line = one_line(res.stderr)
    assert res.code == 1 and str(path) in line and all(w in line for w in words), line
    assert "internal error" not in line and not store.exists()


def test_a_zero_byte_pt_is_named_empty(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "expert_distribution_recorder_1.pt"
    path.write_bytes(b"")
    _refused(store_path, path, "empty")


def test_a_truncated_pt_is_one_line(tmp_path: Path, store_path: Path, counts) -> None:
    path = rec.write_stat(tmp_path / "stat.pt", counts)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    _refused(store_path, path, "torch.load")


def test_json_nested_100000_levels_is_one_line(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "counts.json"
    path.write_text('{"logical_count": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(store_path, path, "nested deeper")


@pytest.mark.parametrize(("value", "words"), [
    (float("nan"), ("negative or non-finite",)),
    (-5, ("negative or non-finite",)),
    ("many", ("not a rectangular array",)),
])  # fmt: skip
def test_an_impossible_count_is_refused(tmp_path: Path, store_path: Path, counts, value,
                                        words: tuple[str, ...]) -> None:  # fmt: skip
    table = counts.tolist()
    table[5][7] = value
    path = tmp_path / "counts.json"
    path.write_text(json.dumps({"logical_count": table}))
    _refused(store_path, path, *words)


def test_a_map_naming_a_billionth_expert_is_refused(tmp_path: Path, store_path: Path,
                                                    counts) -> None:  # fmt: skip
    import torch

    (path,) = rec.write_per_pass(tmp_path, counts, SHAPE, ranks=1, passes=1)
    data = torch.load(path, weights_only=True)
    data["last_physical_to_logical_map"][0, 0] = 10**9
    torch.save(data, path)
    _refused(store_path, path, "names expert 1000000000")


def test_the_same_file_twice_counts_once(tmp_path: Path, store_path: Path, counts) -> None:
    path = rec.write_json(tmp_path / "counts.json", counts)
    once = run_in_process(store_path, "expert-load", str(path), "--model", "deepseek-v3", "--json")
    twice = run_in_process(store_path, "expert-load", str(path), str(path), "--model",
                           "deepseek-v3", "--json")  # fmt: skip
    assert once.code == twice.code == 0, twice.stderr
    assert once.json["run_id"] == twice.json["run_id"]
    assert query(store_path, "SELECT count(*) FROM runs") == [(1,)]
