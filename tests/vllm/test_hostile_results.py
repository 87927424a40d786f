"""vllm-bench against hostile and impossible results (issue 60): one line naming the file and
the field, exit 1, nothing stored; a model_id is a name, never a path to open.

The results are `vllm bench serve --save-result` files in vLLM's shape
(tests/vllm/bench_fixtures.py), each with one value changed; the verb runs in this process
(tests/helpers.run_in_process), as `python -m collectors` runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, one_line, query, run_in_process, run_on_fifo
from tests.vllm import bench_fixtures

KIMI = FIXTURES / "serving" / "configs" / "moonshotai--Kimi-K2.5_config.json"
SECRET = "c2VjcmV0LXJlZ2lzdHJ5LXRva2Vu"  # what a ~/.docker/config.json "auth" holds


def _result(tmp_path: Path, name: str = "c4.json", **changes) -> Path:
    obj = bench_fixtures.result(4)
    obj.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def _store_text(store: Path) -> str:
    """Every text value in the store, joined: what `export` would ship."""
    out = []
    tables = query(store, "SELECT table_name FROM information_schema.tables WHERE "
                   "table_type = 'BASE TABLE'")  # fmt: skip
    for (table,) in tables:
        cols = query(store, "SELECT column_name FROM information_schema.columns WHERE "
                     "table_name = ? AND data_type = 'VARCHAR'", [table])  # fmt: skip
        for (col,) in cols:
            out += [str(v) for (v,) in query(store, f'SELECT "{col}" FROM "{table}"') if v]
    return "\n".join(out)


def _docker_like_folder(root: Path) -> Path:
    """A folder whose config.json is a model's config with a credential in it."""
    folder = root / ".docker"
    folder.mkdir()
    config = json.loads(KIMI.read_text())
    config["auths"] = {"registry.example.com": {"auth": SECRET}}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.skipif(not KIMI.is_file(), reason="tests/fixtures not present")
def test_a_model_id_naming_a_local_folder_reads_nothing_from_it(tmp_path: Path,
                                                                 store_path: Path) -> None:  # fmt: skip
    folder = _docker_like_folder(tmp_path)
    path = _result(tmp_path, model_id=str(folder), tokenizer_id=str(folder))
    res = run_in_process(store_path, "vllm-bench", "--results", str(path),
                         HF_HUB_CACHE=str(tmp_path / "hub"))  # fmt: skip
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT count(*) FROM serving_model_config") == [(0,)]
    text = _store_text(store_path)
    assert SECRET not in text and '"num_hidden_layers"' not in text
    assert query(store_path, "SELECT model_id FROM serving_bench") == [(str(folder),)]


@pytest.mark.skipif(not KIMI.is_file(), reason="tests/fixtures not present")
def test_model_dir_keeps_the_planners_fields_only(tmp_path: Path, store_path: Path) -> None:
    folder = _docker_like_folder(tmp_path)
    path = _result(tmp_path)
    res = run_in_process(store_path, "vllm-bench", "--results", str(path), "--model-dir",
                         str(folder), HF_HUB_CACHE=str(tmp_path / "hub"))  # fmt: skip
    assert res.code == 0, res.stderr
    ((config,),) = query(store_path, "SELECT config_json FROM serving_model_config")
    assert json.loads(config)["text_config"]["num_hidden_layers"] == 61
    assert SECRET not in _store_text(store_path)


def test_a_300_character_model_id_is_a_name(tmp_path: Path, store_path: Path) -> None:
    name = "org/" + "m" * 296
    res = run_in_process(store_path, "vllm-bench", "--results", str(_result(tmp_path, model_id=name)))
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT model_id FROM serving_bench") == [(name,)]


@pytest.mark.parametrize(("changes", "field", "why"), [
    ({"max_concurrency": 1e30}, "max_concurrency", "is over 1e+07"),
    ({"mean_tpot_ms": 0.0001}, "mean_tpot_ms", "is below 0.01 ms"),
    ({"median_tpot_ms": 1e9}, "median_tpot_ms", "is over 3.6e+06 ms"),
    ({"total_output_tokens": 0}, "total_output_tokens", "needs output tokens"),
    ({"duration": -12.5}, "duration", "is negative"),
    ({"mean_ttft_ms": -3.0}, "mean_ttft_ms", "is negative"),
    ({"output_throughput": "fast"}, "output_throughput", "is not a number"),
    ({"request_throughput": float("nan")}, "request_throughput", "is NaN"),
    ({"mean_e2el_ms": float("inf")}, "mean_e2el_ms", "is infinite"),
    ({"completed": 12.5}, "completed", "is not a whole number"),
    ({"tp": "1e30"}, "tp", "is over 65536"),
])  # fmt: skip
def test_an_impossible_value_is_refused_naming_field_and_file(
        tmp_path: Path, store_path: Path, changes: dict, field: str, why: str) -> None:  # fmt: skip
    path = _result(tmp_path, **changes)
    res = run_in_process(store_path, "vllm-bench", "--results", str(path))
    line = one_line(res.stderr)
    assert res.code == 1 and str(path) in line and field in line and why in line, line
    assert "internal error" not in line and not store_path.exists()


def test_a_statistic_written_as_nan_is_no_value_and_said(tmp_path: Path, store_path: Path) -> None:
    """NumPy's mean over no requests is NaN and json.dumps writes it bare: stored as no value,
    and the import says which field of which file."""
    path = _result(tmp_path, std_itl_ms=float("nan"))
    res = run_in_process(store_path, "vllm-bench", "--results", str(path))
    assert res.code == 0, res.stderr
    assert "std_itl_ms written as NaN" in res.stderr and str(path) in res.stderr
    assert query(store_path, "SELECT std_itl_ms, mean_itl_ms IS NOT NULL FROM serving_bench") == [
        (None, True)]  # fmt: skip


def test_json_nested_100000_levels_isone_line(tmp_path: Path, store_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    res = run_in_process(store_path, "vllm-bench", "--results", str(path))
    line = one_line(res.stderr)
    assert res.code == 1 and str(path) in line and "nested deeper" in line, line


def test_a_fifo_is_named_never_waited_on(tmp_path: Path, store_path: Path) -> None:
    fifo = tmp_path / "results.json"
    res = run_on_fifo(fifo, store_path, "vllm-bench", "--results", str(fifo))
    line = one_line(res.stderr)
    assert res.code == 1 and "FIFO" in line and str(fifo) in line


def test_the_same_file_twice_is_one_run(tmp_path: Path, store_path: Path) -> None:
    (a, b) = bench_fixtures.write_sweep(tmp_path / "sweep", levels=(1, 4))
    copy = tmp_path / "copy.json"
    copy.write_bytes(a.read_bytes())
    once = run_in_process(store_path, "vllm-bench", "--results", str(a), str(b), "--json")
    twice = run_in_process(store_path, "vllm-bench", "--results", str(a), str(b), str(a),
                           str(copy), "--json")  # fmt: skip
    assert once.code == twice.code == 0, twice.stderr
    assert twice.json["run_id"] == once.json["run_id"] and twice.json["results"] == 2
    assert query(store_path, "SELECT count(*) FROM serving_bench") == [(2,)]
