"""``sglang-bench --results`` on JSONL of every ``bench_serving`` era (tests/sglang/
era_fixtures.py: the key sets of python/sglang/bench_serving.py at each commit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import query, run_cli
from tests.sglang import era_fixtures as eras
from tests.sglang.conftest import MODEL

COLUMNS = ("concurrency", "max_concurrency", "request_rate", "completed", "duration_s",
           "total_input_tokens", "total_output_tokens", "request_throughput",
           "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms",
           "std_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms",
           "mean_e2el_ms", "median_e2el_ms", "extra")  # fmt: skip


def _import(tmp_path: Path, store: Path, *lines: str):
    path = tmp_path / "sglang.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    res = run_cli(store, "sglang-bench", "--results", str(path), "--model", MODEL,
                  "--server-args", "--tp 8", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    rows = query(store, f"SELECT {', '.join(COLUMNS)} FROM v_serving_bench ORDER BY source")
    return res, [dict(zip(COLUMNS, r, strict=True)) for r in rows]


def test_fixtures_hold_the_upstream_key_counts() -> None:
    for commit, line in eras.ERAS.items():
        assert len(json.loads(line)) == eras.KEY_COUNTS[commit], commit


def test_late_2024_file_with_bare_infinity_and_no_limit(tmp_path: Path, store_path: Path) -> None:
    """The file of issue 20: 18 keys, "request_rate": Infinity, max_concurrency null, no
    mean_*_ms nor request_throughput."""
    res, rows = _import(tmp_path, store_path, eras.NOVEMBER_2024, eras.NOVEMBER_2024_C16)
    assert res.json["concurrency"] == [16] and res.json["models"] == [MODEL]
    unlimited, limited = rows
    assert unlimited["concurrency"] is None and unlimited["max_concurrency"] is None
    assert limited["concurrency"] == 16 and limited["request_rate"] is None  # inf
    assert (limited["median_ttft_ms"], limited["median_itl_ms"], limited["median_e2el_ms"],
            limited["mean_e2el_ms"]) == (182.5, 10.9, 2990.7, 3050.2)  # fmt: skip
    assert (limited["output_throughput"], limited["completed"], limited["duration_s"],
            limited["total_output_tokens"]) == (1310.4, 64, 12.5, 16384)  # fmt: skip
    # what this era did not write stays NULL: nothing derived from completed / duration
    for col in ("request_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms",
                "std_ttft_ms", "p99_tpot_ms", "total_token_throughput"):  # fmt: skip
        assert limited[col] is None, col
    assert json.loads(limited["extra"])["total_output_tokens_retokenized"] == 16379


def test_july_2024_names_and_the_median_itl_that_was_a_mean(tmp_path: Path,
                                                             store_path: Path) -> None:  # fmt: skip
    _, rows = _import(tmp_path, store_path, eras.JULY_20_2024, eras.JULY_24_2024)
    first, second = rows  # sglang.jsonl#1, #2
    # 4b4a67f8 wrote metrics.mean_itl_ms under "median_itl"
    assert (first["median_ttft_ms"], first["mean_itl_ms"], first["median_itl_ms"]) == (
        182.5, 11.2, None)  # fmt: skip
    assert first["output_throughput"] == 1310.4 and first["completed"] is None
    # fa7ccb33: "median_itl" is the median; e2e latency and the token totals
    assert (second["median_itl_ms"], second["mean_itl_ms"]) == (10.9, None)
    assert (second["mean_e2el_ms"], second["median_e2el_ms"], second["duration_s"]) == (
        3050.2, 2990.7, 12.5)  # fmt: skip
    assert (second["total_input_tokens"], second["total_output_tokens"]) == (65536, 16384)
    assert json.loads(second["extra"])["total_output_tokens_retokenized"] == 16379


def test_2025_eras(tmp_path: Path, store_path: Path) -> None:
    _, rows = _import(tmp_path, store_path, eras.AUGUST_2024, eras.JANUARY_7_2025,
                      eras.JANUARY_10_2025, eras.NOVEMBER_2025)  # fmt: skip
    aug, jan7, jan10, nov = rows
    assert aug["median_itl_ms"] == 10.9 and aug["concurrency"] is None
    assert (jan7["mean_ttft_ms"], jan7["mean_itl_ms"], jan7["mean_tpot_ms"]) == (190.1, 11.2, None)
    assert jan7["concurrency"] == 16 and jan7["request_throughput"] is None
    assert jan10["std_ttft_ms"] is None and jan10["p99_tpot_ms"] == 12.1  # bare NaN read as NULL
    assert nov["request_throughput"] == 5.12 and nov["concurrency"] == 16
    extra = json.loads(nov["extra"])
    # replayed timestamps: no rate, and not "all at once" either
    assert nov["request_rate"] is None and extra["request_rate"] == "trace"
    assert extra["mean_concurrency"] == 15.6 and "server_info" not in extra
    # every extra is valid JSON for DuckDB's own functions
    assert query(store_path, "SELECT count(*) FROM v_serving_bench "
                 "WHERE json_valid(extra)") == [(4,)]  # fmt: skip


def test_a_non_finite_statistic_outside_the_columns_is_standard_json(tmp_path: Path,
                                                                     store_path: Path) -> None:  # fmt: skip
    """np.mean of an empty list is NaN and json.dumps writes it bare; a key with no column of
    its own goes to `extra`, which stays standard JSON (NaN is null, as in the columns)."""
    line = eras.NOVEMBER_2025.replace('"p95_itl_ms": 15.0', '"p95_itl_ms": NaN').replace(
        '"random_range_ratio": 1.0', '"random_range_ratio": Infinity')  # fmt: skip
    _, (row,) = _import(tmp_path, store_path, line)

    def refuse(name: str) -> None:
        raise AssertionError(f"extra holds a bare {name}: not standard JSON")

    extra = json.loads(row["extra"], parse_constant=refuse)
    assert "p95_itl_ms" in extra and extra["p95_itl_ms"] is None
    assert extra["random_range_ratio"] == "inf" and extra["request_rate"] == "trace"


@pytest.mark.parametrize("text", [
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity}\n',
    '{"date": "20250101", "model_id": "m", "num_prompts": 8}',
    "[1, 2, 3]",
])  # fmt: skip
def test_a_file_that_is_no_result_is_one_line(tmp_path: Path, store_path: Path, text: str) -> None:
    path = tmp_path / "not-a-result.jsonl"
    path.write_text(text)
    res = run_cli(store_path, "sglang-bench", "--results", str(path), "--model", MODEL)
    assert res.code == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a serving benchmark result" in lines[0], res.stderr
    assert str(path) in lines[0] and not store_path.exists()
