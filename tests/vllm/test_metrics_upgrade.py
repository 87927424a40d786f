"""Migration 0010 on stores, spool entries and exports written before it: metric scrapes of
both engines move from ``vllm_metrics_samples`` to ``serving_metrics_samples`` unchanged.

The old rows are what the scrape wrote at schema v9 (``engine`` then held vLLM's engine
label), built from the real expositions in tests/fixtures/serving/metrics/.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from collectors.serving.metrics import scrape_rows
from collectors.serving.sglang.metrics import ADAPTER as SGLANG
from collectors.serving.vllm.metrics import ADAPTER as VLLM
from store import migrate
from store.location import resolve
from store.spool.bundle import Bundle, RunRecord, write_spool
from tests.helpers import FIXTURES, query, run_cli

METRICS = FIXTURES / "serving" / "metrics"
OLD_COLUMNS = ("run_id", "scraped_at", "url", "metric", "kind", "sample", "model_name",
               "engine", "labels", "le", "value")  # fmt: skip
RUNS = {  # run id -> (verb, adapter, fixture, scraped at)
    "old-vllm": ("vllm-metrics", VLLM, "vllm_aibrix_runtime_metrics.prom",
                 "2025-01-30T06:35:00+00:00"),
    "old-sglang": ("sglang-metrics", SGLANG, "sglang_production_metrics.prom",
                   "2025-01-30T06:36:00+00:00"),
}  # fmt: skip


def old_rows(run_id: str) -> list[tuple]:
    """The v9 ``vllm_metrics_samples`` rows of one scrape (engine = the `engine` label)."""
    _, adapter, name, at = RUNS[run_id]
    cols = scrape_rows((METRICS / name).read_text(), "http://10.0.0.7:8000", at, adapter)
    rows = []
    for i in range(len(cols["metric"])):
        rows.append((run_id, at, cols["url"][i], cols["metric"][i], cols["kind"][i],
                     cols["sample"][i], cols["model_name"][i], cols["engine_index"][i],
                     cols["labels"][i], cols["le"][i], cols["value"][i]))  # fmt: skip
    return rows


def fill_old_schema(con: duckdb.DuckDBPyConnection, also: tuple[int, ...] = ()) -> list[tuple]:
    """Migrations 1-9 (and those in ``also``) on ``con``, then one vLLM and one SGLang scrape
    in ``vllm_metrics_samples``; returns their rows."""
    con.execute("CREATE TABLE stepscope_schema (version INTEGER NOT NULL, name VARCHAR NOT NULL, "
                "applied_at TIMESTAMP WITH TIME ZONE NOT NULL)")  # fmt: skip
    for m in migrate.migrations():
        if m.version < 10 or m.version in also:
            con.execute(m.sql)
            con.execute("INSERT INTO stepscope_schema VALUES (?, ?, now())", [m.version, m.name])
    rows = []
    for run_id, (verb, _, _, at) in RUNS.items():
        con.execute("INSERT INTO runs (run_id, verb, host, started_at, finished_at, status) "
                    "VALUES (?, ?, 'gpu-node-7', ?, ?, 'ok')", [run_id, verb, at, at])  # fmt: skip
        rows += old_rows(run_id)
    con.executemany(f"INSERT INTO vllm_metrics_samples VALUES ({', '.join('?' * 11)})", rows)
    return rows


def v9_store(path: Path, also: tuple[int, ...] = ()) -> list[tuple]:
    """A store file at schema v9 holding one vLLM and one SGLang scrape; returns their rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    try:
        return fill_old_schema(con, also)
    finally:
        con.close()


def canon_rows(rows) -> list[tuple]:
    """Rows comparable across reads: timestamps as UTC text, sorted."""
    return sorted((r[0], str(r[1])[:19].replace(" ", "T"), *r[2:]) for r in rows)


NEW_AS_OLD = ("SELECT run_id, strftime(scraped_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S'), url, "
              "metric, kind, sample, model_name, engine_index, labels, le, value "
              "FROM serving_metrics_samples")  # fmt: skip


def test_an_older_store_keeps_every_scrape_row(store_path: Path) -> None:
    before = v9_store(store_path)
    assert run_cli(store_path, "host").code == 0  # any commit upgrades the store
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        assert migrate.store_version(con) == migrate.code_version()
        assert canon_rows(con.execute(NEW_AS_OLD).fetchall()) == canon_rows(before)
        engines = con.execute("SELECT run_id, engine, count(*) FROM serving_metrics_samples "
                              "GROUP BY ALL ORDER BY run_id").fetchall()  # fmt: skip
        assert engines == [("old-sglang", "sglang", 91), ("old-vllm", "vllm", 29)]
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables")
                  .fetchall()}
        assert "vllm_metrics_samples" not in tables
        # The v_vllm_metrics contract: vLLM's samples only, `engine` = vLLM's engine label
        old_view = con.execute("SELECT count(*), count(engine) FROM v_vllm_metrics").fetchone()
        assert old_view == (29, 0)  # this vLLM (0.7) labels no engine core
        vllm = con.execute("SELECT model_name, kv_cache_usage, generation_tokens, "
                           "requests_finished FROM v_vllm_scrapes").fetchall()  # fmt: skip
        assert vllm == [("Qwen/Qwen2.5-Coder-1.5B-Instruct", 0.0, 955.0, 4.0)]
        sglang = con.execute("SELECT model_name, running, waiting, kv_cache_usage, itl_count "
                             "FROM v_sglang_scrapes").fetchall()  # fmt: skip
        assert sglang == [("meta-llama/Llama-3.1-8B-Instruct", 162.0, 2826.0, 0.28, 7400757.0)]
    finally:
        con.close()


def _old_bundle(run_id: str) -> Bundle:
    verb, _, _, at = RUNS[run_id]
    cols = {k: [] for k in OLD_COLUMNS[1:]}
    for row in old_rows(run_id):
        for k, v in zip(OLD_COLUMNS[1:], row[1:], strict=True):
            cols[k].append(v)
    record = RunRecord(run_id=run_id, verb=verb, host="gpu-node-7", started_at=at, finished_at=at)
    return Bundle(record, {"vllm_metrics_samples": cols})


def test_a_spool_entry_written_before_the_upgrade_still_commits(store_path: Path) -> None:
    loc = resolve(str(store_path))
    assert run_cli(store_path, "host").code == 0  # a store at the current schema
    write_spool(_old_bundle("old-sglang"), loc.spool_dir)
    res = run_cli(store_path, "flush", "--json")
    assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT engine, count(*), count(model_name), count(engine_index) "
                 "FROM serving_metrics_samples GROUP BY engine")  # fmt: skip
    assert rows == [("sglang", 91, 70, 0)]  # func_latency_seconds carries no model_name
    assert not [p for p in loc.spool_dir.iterdir() if p.name != "corrupt"]


def old_export(tmp_path: Path, run_id: str) -> Path:
    """The export folder an older Stepscope (schema v9) wrote for ``run_id``."""
    from collectors.upkeep.export_run import _write_folder

    old_store = tmp_path / "old" / "stepscope.duckdb"
    if not old_store.exists():
        v9_store(old_store)
    con = duckdb.connect(str(old_store), read_only=True)
    try:
        tables = {name: con.execute(f"SELECT * FROM {name} WHERE run_id = ?", [run_id])
                  .to_arrow_table() for name in ("runs", "vllm_metrics_samples")}  # fmt: skip
    finally:
        con.close()
    folder = tmp_path / f"export-{run_id}"
    folder.mkdir()
    _write_folder(tables, folder, run_id, 9)  # the export format is unchanged since v1
    return folder


def test_an_export_made_before_the_upgrade_imports(tmp_path: Path, store_path: Path) -> None:
    """An old Stepscope's export names vllm_metrics_samples; import checks and commits it."""
    folder = old_export(tmp_path, "old-vllm")
    assert json.loads((folder / "manifest.json").read_text())["schema_version"] == 9
    for _ in range(2):  # the second import is a no-op
        res = run_cli(store_path, "import", str(folder))
        assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT engine, count(*) FROM serving_metrics_samples GROUP BY ALL")
    assert rows == [("vllm", 29)]
    assert query(store_path, "SELECT count(*) FROM v_vllm_scrapes") == [(1,)]


def test_an_export_with_a_column_of_no_schema_is_refused(tmp_path: Path, store_path: Path) -> None:
    import pyarrow as pa

    from collectors.upkeep.export_run import _write_folder

    old_store = tmp_path / "old" / "stepscope.duckdb"
    v9_store(old_store)
    con = duckdb.connect(str(old_store), read_only=True)
    try:
        runs = con.execute("SELECT * FROM runs WHERE run_id = 'old-vllm'").to_arrow_table()
        samples = con.execute("SELECT *, 1 AS bogus FROM vllm_metrics_samples "
                              "WHERE run_id = 'old-vllm'").to_arrow_table()  # fmt: skip
    finally:
        con.close()
    folder = tmp_path / "export"
    folder.mkdir()
    _write_folder({"runs": runs, "vllm_metrics_samples": pa.table(samples)}, folder, "old-vllm", 9)
    res = run_cli(store_path, "import", str(folder))
    assert res.code == 1 and "vllm_metrics_samples" in res.stderr and "bogus" in res.stderr
    assert "Traceback" not in res.stderr


def test_migrate_copies_an_older_store(tmp_path: Path, store_path: Path) -> None:
    before = v9_store(store_path)
    dest = tmp_path / "copy" / "stepscope.duckdb"
    res = run_cli(store_path, "migrate", "--to", str(dest))
    assert res.code == 0, res.stderr
    assert "serving_metrics_samples: 120 row(s) in source" in res.stderr
    assert canon_rows(query(dest, NEW_AS_OLD)) == canon_rows(before)


def test_a_store_that_got_0011_before_0010_is_upgraded(store_path: Path) -> None:
    """0011 (series) landed in the tree before 0010: a store made then holds 1-9 and 11. It
    reads as v9, and the next commit applies 0010 alone; the series views still read."""
    before = v9_store(store_path, also=(11,))
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        assert migrate.store_version(con) == 9
    finally:
        con.close()
    res = run_cli(store_path, "doctor")
    assert "schema v9, the next commit upgrades it" in res.stderr + res.stdout
    assert run_cli(store_path, "host").code == 0
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        assert migrate.applied_versions(con) == [m.version for m in migrate.migrations()]
        assert migrate.store_version(con) == migrate.code_version()
        assert canon_rows(con.execute(NEW_AS_OLD).fetchall()) == canon_rows(before)
        assert con.execute("SELECT count(*) FROM v_series_points").fetchone() == (0,)
    finally:
        con.close()
    bench = run_cli(store_path, "sglang-bench", "--results", str(_one_result(store_path.parent)),
                    "--model", "m", "--server-args", "--tp 8")  # fmt: skip
    assert bench.code == 0, bench.stderr
    assert query(store_path, "SELECT metric, value FROM v_series_points WHERE family = 'serving' "
                 "ORDER BY metric") == [("median_itl_ms", 10.9), ("median_ttft_ms", 182.5),
                                        ("output_throughput", 1310.4)]  # fmt: skip


def _one_result(folder: Path) -> Path:
    from tests.sglang.era_fixtures import NOVEMBER_2024_C16

    path = folder / "late-2024.jsonl"
    path.write_text(NOVEMBER_2024_C16 + "\n")
    return path
