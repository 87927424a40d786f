"""Migration 0010 on a DuckLake catalog (real PostgreSQL): an older lake's scrape rows move to
``serving_metrics_samples``; an older store migrated in and an older export imported land
there too (tests/vllm/test_metrics_upgrade.py builds the v9 rows from real expositions)."""

from __future__ import annotations

from pathlib import Path

from store import migrate
from store.connect import connection
from store.location import resolve
from store.reader import clear_cache
from tests.helpers import run_cli
from tests.lake.conftest import Lake
from tests.vllm.test_metrics_upgrade import (
    NEW_AS_OLD,
    canon_rows,
    fill_old_schema,
    old_export,
    v9_store,
)


def _lake_rows(lake: Lake, sql: str) -> list[tuple]:
    with connection(resolve(lake.url), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_an_older_lake_keeps_every_scrape_row(lake: Lake, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STEPSCOPE_SPOOL", str(lake.spool))
    with connection(resolve(lake.url), read_only=False) as con:
        before = fill_old_schema(con)
    clear_cache()
    res = run_cli(tmp_path / "unused.duckdb", "host", "--store", lake.url, **lake.env())
    assert res.code == 0, res.stderr
    with connection(resolve(lake.url), read_only=True) as con:
        assert migrate.store_version(con) == migrate.code_version()
        assert canon_rows(con.execute(NEW_AS_OLD).fetchall()) == canon_rows(before)
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_catalog = current_database()").fetchall()}  # fmt: skip
        assert "serving_metrics_samples" in tables and "vllm_metrics_samples" not in tables
        assert con.execute("SELECT engine, model_name, running, kv_cache_usage FROM "
                           "v_serving_scrapes ORDER BY engine").fetchall() == [
            ("sglang", "meta-llama/Llama-3.1-8B-Instruct", 162.0, 0.28),
            ("vllm", "Qwen/Qwen2.5-Coder-1.5B-Instruct", 0.0, 0.0)]  # fmt: skip


def test_an_older_export_and_an_older_store_go_into_a_lake(migrated_lake: Lake,
                                                           tmp_path: Path) -> None:  # fmt: skip
    folder = old_export(tmp_path, "old-vllm")  # also leaves tmp_path/old/ at schema v9
    imp = run_cli(tmp_path / "unused.duckdb", "import", str(folder), "--store", migrated_lake.url,
                  **migrated_lake.env())  # fmt: skip
    assert imp.code == 0, imp.stderr
    assert _lake_rows(migrated_lake, "SELECT engine, count(*) FROM serving_metrics_samples "
                      "GROUP BY ALL") == [("vllm", 29)]  # fmt: skip
    src = tmp_path / "src" / "stepscope.duckdb"
    before = v9_store(src)  # the same two scrapes: old-vllm is in the lake already
    res = run_cli(src, "migrate", "--to", migrated_lake.url, "--json", **migrated_lake.env())
    assert res.code == 0, res.stderr
    assert res.json["new_runs"] == 1 and res.json["ok"]
    assert res.json["tables"]["serving_metrics_samples"] == {"source": 120, "copied": 91,
                                                             "target": 120}  # fmt: skip
    assert canon_rows(_lake_rows(migrated_lake, NEW_AS_OLD)) == canon_rows(before)
