"""Small tables spooled as JSON columns (store/spool/bundle.py): same rows as Parquet, or Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from collectors.trace.ingest import ingest_traces
from collectors.trace.table import Column, Table
from store.commit import _select_rows, commit_entry, flush
from store.connect import connection
from store.location import StoreLocation, resolve
from store.spool import bundle as bundle_mod
from store.spool.bundle import (
    Bundle,
    CorruptBundle,
    RunRecord,
    read_manifest,
    utc_now_iso,
    write_spool,
)
from tests.helpers import FIXTURES

# Two real ranks: per-rank parts whose dictionaries (kernel names) differ.
RANKS = [FIXTURES / "traces/hta/sampled_rank-0.json.gz", FIXTURES / "traces/hta/sampled_rank-1.json.gz"]


def _run(run_id: str = "trace-json") -> RunRecord:
    now = utc_now_iso()
    return RunRecord(run_id=run_id, verb="trace", host="h", started_at=now, finished_at=now)


def _rows(loc: StoreLocation, table: str) -> list[tuple]:
    with connection(loc, read_only=True) as con:
        return con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def test_a_small_trace_spools_as_json_and_commits_the_rows_parquet_would(tmp_path: Path) -> None:
    tables = ingest_traces(RANKS).tables
    as_json, as_parquet = resolve(tmp_path / "j.duckdb"), resolve(tmp_path / "p.duckdb")
    entry = write_spool(Bundle(_run(), tables), as_json.spool_dir)
    manifest = read_manifest(entry)
    assert manifest["format"] == bundle_mod.BUNDLE_FORMAT_JSON
    assert {t["file"].rsplit(".", 1)[1] for t in manifest["tables"].values()} == {"json"}
    assert dict(manifest["tables"]["trace_kernels"]["columns"])["step"] == "INTEGER"
    commit_entry(as_json, entry)
    arrow = {name: t.to_arrow() for name, t in tables.items()}  # what any pyarrow table takes
    entry = write_spool(Bundle(_run(), arrow), as_parquet.spool_dir)
    assert read_manifest(entry)["format"] == bundle_mod.BUNDLE_FORMAT
    commit_entry(as_parquet, entry)
    for name, table in tables.items():
        rows = _rows(as_json, name)
        assert len(rows) == len(table) and rows == _rows(as_parquet, name), name
    assert len(_rows(as_json, "trace_kernels")) > 1000
    for loc in (as_json, as_parquet):
        with connection(loc, read_only=True) as con:
            assert con.execute("SELECT run_id, verb FROM runs").fetchall() == [("trace-json", "trace")]


def test_a_big_table_is_written_in_slices_with_the_rows_of_one_write(tmp_path: Path,
                                                                    monkeypatch) -> None:  # fmt: skip
    """Past PARQUET_SLICE_ROWS rows a typed table goes to Parquet a slice at a time (two
    ranks' parts, each with its own dictionaries, several slices each): the store gets the
    rows one whole Arrow table gives."""
    tables = ingest_traces(RANKS).tables
    kernels = tables["trace_kernels"]
    monkeypatch.setattr(bundle_mod, "JSON_MAX_ROWS", 0)
    monkeypatch.setattr(bundle_mod, "PARQUET_SLICE_ROWS", 500)
    assert all(len(next(iter(p.values())).values) > 500 for p in kernels.parts)
    sliced, whole = resolve(tmp_path / "s.duckdb"), resolve(tmp_path / "w.duckdb")
    entry = write_spool(Bundle(_run(), {"trace_kernels": kernels}), sliced.spool_dir)
    assert read_manifest(entry)["tables"]["trace_kernels"]["rows"] == len(kernels)
    import pyarrow.parquet as pq

    assert pq.ParquetFile(entry / "trace_kernels.parquet").num_row_groups > 2
    commit_entry(sliced, entry)
    entry = write_spool(Bundle(_run(), {"trace_kernels": kernels.to_arrow()}), whole.spool_dir)
    commit_entry(whole, entry)
    rows = _rows(sliced, "trace_kernels")
    assert len(rows) == len(kernels) and rows == _rows(whole, "trace_kernels")


def _steps(names: list[str | None], wall: list[float]) -> Table:
    n = len(names)
    return Table([{"rank": Column("int32", np.zeros(n)), "step": Column("int32", np.arange(n)),
                   "name": Column("string", names), "wall_us": Column("double", wall)}])  # fmt: skip


def test_a_column_named_like_a_keyword(tmp_path: Path) -> None:
    """Column names go into the commit's SQL quoted: ``order`` is a keyword."""
    (tmp_path / "t.json").write_bytes(b'{"order": [7, 8]}')
    info = {"file": "t.json", "columns": [["order", "INTEGER"]]}
    with duckdb.connect() as con:
        con.execute("CREATE TEMP TABLE spool_run AS SELECT 'r' AS run_id")
        assert con.execute(_select_rows(tmp_path, info)).fetchall() == [("r", 7), ("r", 8)]


def test_strings_that_look_like_dates_or_numbers_stay_strings(loc: StoreLocation) -> None:
    names = ["2026-12-01", "12:30:00", "1e5", "true", "null", 'say "hi"\n', None, "ÿ ✓"]
    entry = write_spool(Bundle(_run(), {"trace_steps": _steps(names, [1.5] * 8)}), loc.spool_dir)
    assert read_manifest(entry)["tables"]["trace_steps"]["file"] == "trace_steps.json"
    commit_entry(loc, entry)
    with connection(loc, read_only=True) as con:
        got = con.execute("SELECT name, wall_us FROM trace_steps ORDER BY step").fetchall()
    assert got == [(n, 1.5) for n in names]


def test_what_json_cannot_hold_exactly_goes_to_parquet(loc: StoreLocation, monkeypatch) -> None:
    nan = {"trace_steps": _steps(["a", "b"], [1.0, float("nan")])}
    entry = write_spool(Bundle(_run("trace-nan"), nan), loc.spool_dir)
    manifest = read_manifest(entry)
    assert manifest["tables"]["trace_steps"]["file"] == "trace_steps.parquet"
    assert manifest["format"] == bundle_mod.BUNDLE_FORMAT
    commit_entry(loc, entry)
    with connection(loc, read_only=True) as con:
        walls = con.execute("SELECT wall_us FROM trace_steps ORDER BY step").fetchall()
    assert walls[0] == (1.0,) and np.isnan(walls[1][0])
    # a table that needs pyarrow anyway (a nested value): then the small one is Parquet too
    mixed = {"trace_steps": _steps(["a"], [1.0]), "vllm_load": [{"request": [0]}]}
    entry = write_spool(Bundle(_run("trace-mixed"), mixed), loc.spool_dir)
    assert read_manifest(entry)["tables"]["trace_steps"]["file"] == "trace_steps.parquet"
    monkeypatch.setattr(bundle_mod, "JSON_MAX_ROWS", 1)  # a big table: Parquet
    big = {"trace_steps": _steps(["a", "b"], [1.0, 2.0])}
    entry = write_spool(Bundle(_run("trace-big"), big), loc.spool_dir)
    assert read_manifest(entry)["tables"]["trace_steps"]["file"] == "trace_steps.parquet"


@pytest.mark.parametrize("columns", [
    [["step", "INTEGER); DROP TABLE runs; --"]],  # only known SQL types reach the SQL
    [["step; DROP TABLE runs", "INTEGER"]],  # and only identifiers
    [["run_id", "VARCHAR"]],  # the commit adds run_id
    [],
    "step",
])  # fmt: skip
def test_a_json_column_list_that_is_not_plain_is_set_aside(loc: StoreLocation, columns) -> None:
    steps = {"trace_steps": _steps(["a"], [1.0])}
    commit_entry(loc, write_spool(Bundle(_run("trace-ok"), steps), loc.spool_dir))
    entry = write_spool(Bundle(_run(), steps), loc.spool_dir)
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["tables"]["trace_steps"]["columns"] = columns
    (entry / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptBundle, match="column list is malformed"):
        read_manifest(entry)
    report = flush(loc)
    assert [name for name, _, _ in report.moved_aside] == [entry.name]
    with connection(loc, read_only=True) as con:
        assert con.execute("SELECT run_id FROM runs").fetchall() == [("trace-ok",)]
        assert con.execute("SELECT count(*) FROM trace_steps").fetchall() == [(1,)]
