"""Migration 0007 on a store written before it: old vLLM results become engine 'vllm'."""

from __future__ import annotations

from pathlib import Path

import duckdb

from store import migrate
from tests.helpers import query, run_cli
from tests.vllm import bench_fixtures


def test_pre_0007_results_are_vllm_after_the_upgrade(tmp_path: Path, store_path: Path) -> None:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(store_path))
    con.execute("CREATE TABLE stepscope_schema (version INTEGER NOT NULL, name VARCHAR NOT NULL, "
                "applied_at TIMESTAMP WITH TIME ZONE NOT NULL)")  # fmt: skip
    for m in migrate.migrations():
        if m.version < 7:
            con.execute(m.sql)
            con.execute("INSERT INTO stepscope_schema VALUES (?, ?, now())", [m.version, m.name])
    con.execute("INSERT INTO runs (run_id, verb, host, started_at, finished_at, status) VALUES "
                "('old-run', 'vllm-bench', 'h', now(), now(), 'ok')")  # fmt: skip
    con.execute("INSERT INTO serving_bench (run_id, source, model_id, concurrency, mean_tpot_ms, "
                "vllm_version) VALUES ('old-run', 'a.json', 'm', 4, 20.0, '0.11.0')")  # fmt: skip
    con.close()
    bench_fixtures.write_sweep(tmp_path / "new", levels=(1,))
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "new"))
    assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT run_id, engine, engine_version, result_format "
                 "FROM v_serving_bench ORDER BY run_id")  # fmt: skip
    assert ("old-run", "vllm", "0.11.0", None) in rows
    assert any(r[1:] == ("vllm", None, "json") for r in rows if r[0] != "old-run")
