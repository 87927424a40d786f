"""Export a whole run from one store and import it into another (embedded and lake)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import duckdb
import pytest

from collectors.cli import main
from store.commit import commit_entry
from store.connect import connection
from store.location import resolve
from store.spool.bundle import write_spool
from tests.helpers import run_cli
from tests.lake.conftest import Lake
from tests.store.bundles import host_bundle


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, str]:
    """An embedded store with one run of 40 GPU rows (Parquet-sized on a lake too)."""
    store = tmp_path / "a" / "stepscope.duckdb"
    loc = resolve(store)
    bundle = host_bundle("node-1", gpus=40, label="handed over")
    commit_entry(loc, write_spool(bundle, loc.spool_dir))
    commit_entry(loc, write_spool(host_bundle("node-2", gpus=2), loc.spool_dir))  # not exported
    return store, bundle.run.run_id


def _rows(url: str | Path, run_id: str) -> tuple:
    with connection(resolve(url), read_only=True) as con:
        runs = con.execute(
            "SELECT * EXCLUDE (committed_at) FROM runs WHERE run_id = ?", [run_id]
        ).df()
        gpus = con.execute(
            "SELECT * FROM host_gpus WHERE run_id = ? ORDER BY gpu_index", [run_id]
        ).df()
    return runs, gpus


def test_export_then_import_on_another_store(source, lake: Lake, tmp_path: Path) -> None:
    store, run_id = source
    as_zip, as_dir = tmp_path / "run.zip", tmp_path / "run-dir"
    for out in (as_zip, as_dir):
        res = run_cli(store, "export", run_id, "--out", str(out), "--json")
        assert res.code == 0, res.stderr
        assert res.json["rows"] == {"host_gpus": 40, "runs": 1}
    want = _rows(store, run_id)
    other = tmp_path / "b" / "stepscope.duckdb"
    # The zip into another embedded store, the folder into a lake: same rows, every column.
    for target, path, env in ((other, as_zip, {}), (lake.url, as_dir, lake.env())):
        imp = run_cli(other, "import", str(path), "--store", str(target), "--json", **env)
        assert imp.code == 0, imp.stderr
        assert imp.json["run_id"] == run_id and imp.json["committed"]
        got = _rows(target, run_id)
        assert got[0].equals(want[0]) and got[1].equals(want[1])
    # Re-import (here the zip of the same run into the lake) changes nothing.
    again = run_cli(other, "import", str(as_zip), "--store", lake.url, **lake.env())
    assert again.code == 0 and "already in the store" in again.stderr
    with connection(resolve(lake.url), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM host_gpus").fetchone()[0] == 40


def test_export_refuses_unknown_run_and_existing_output(source, tmp_path: Path) -> None:
    store, run_id = source
    res = run_cli(store, "export", "no-such-run", "--out", str(tmp_path / "x.zip"))
    assert res.code == 1 and "no-such-run: no such run" in res.stderr
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    res2 = run_cli(store, "export", run_id, "--out", str(tmp_path / "taken"))
    assert res2.code == 1 and "not an empty folder" in res2.stderr


@pytest.fixture(scope="module")
def good_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real export, shared by the hostile-input tests that each damage a copy."""
    tmp = tmp_path_factory.mktemp("export")
    store = tmp / "stepscope.duckdb"
    loc = resolve(store)
    bundle = host_bundle("node-1", gpus=40)
    commit_entry(loc, write_spool(bundle, loc.spool_dir))
    out = tmp / "good.zip"
    assert main(["export", bundle.run.run_id, "--out", str(out), "--store", str(store)]) == 0
    return out


def _rewrite(good: Path, dest: Path, change) -> Path:  # noqa: ANN001
    with zipfile.ZipFile(good) as zf:
        files = {i.filename: zf.read(i) for i in zf.infolist()}
    files = change(files)
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return dest


def _manifest_edit(**edits):  # noqa: ANN003, ANN202
    def change(files: dict) -> dict:
        manifest = json.loads(files["manifest.json"])
        manifest.update(edits)
        files["manifest.json"] = json.dumps(manifest).encode()
        return files

    return change


def _with_column(files: dict, table_name: str, column: str, values: list) -> dict:
    """The export's files with one column of a table replaced (a real Parquet file that
    parses) and the manifest's checksum of it made to match."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = f"{table_name}.parquet"
    table = pq.read_table(io.BytesIO(files[file]))
    table = table.set_column(table.column_names.index(column), column, pa.array(values))
    buf = io.BytesIO()
    pq.write_table(table, buf)
    files[file] = buf.getvalue()
    manifest = json.loads(files["manifest.json"])
    manifest["tables"][table_name]["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    files["manifest.json"] = json.dumps(manifest).encode()
    return files


def _swap_rows(files: dict) -> dict:
    """gpu_index values that are text: the file parses, but cannot commit."""
    import pyarrow.parquet as pq

    rows = pq.read_metadata(io.BytesIO(files["host_gpus.parquet"])).num_rows
    return _with_column(files, "host_gpus", "gpu_index", ["x"] * rows)


HOSTILE = {
    "traversal": (lambda f: {**f, "../evil.parquet": b"x"}, "unexpected entry"),
    "not-json": (lambda f: {**f, "manifest.json": b"{nope"}, "not valid JSON"),
    "deep-json": (lambda f: {**f, "manifest.json": b"[" * 100_000 + b"]" * 100_000},
                  "not valid JSON"),
    "bad-checksum": (
        lambda f: {**f, "runs.parquet": f["runs.parquet"][:-9] + b"0" * 9},
        "does not match its checksum",
    ),  # fmt: skip
    "sql-in-run-id": (_manifest_edit(run_id="x'; DROP TABLE runs; --"), "run id"),
    "newer-schema": (_manifest_edit(schema_version=99999), "newer than this Stepscope"),
    "wrong-types": (_swap_rows, "rows do not fit the schema"),
    "unknown-table": (
        _manifest_edit(tables={"runs": {}, "evil_table": {}}),
        "file for table runs is missing",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_import_is_one_line_and_commits_nothing(
    good_zip: Path, case: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    change, message = HOSTILE[case]
    bad = _rewrite(good_zip, tmp_path / f"{case}.zip", change)
    target = tmp_path / "t" / "stepscope.duckdb"
    code = main(["import", str(bad), "--store", str(target), "--log-format", "text"])
    err = capsys.readouterr().err
    assert code == 1
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (
        not target.exists()
        or duckdb.connect(str(target)).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    )
    spool = target.with_name(target.name + ".spool")
    assert not spool.exists() or not any(spool.iterdir())


def test_zip_bomb_and_garbage_are_refused(good_zip: Path, tmp_path: Path) -> None:
    good = good_zip
    bomb = _rewrite(good, tmp_path / "bomb.zip", lambda f: {**f, "big.parquet": b"\0" * 3_000_000})
    res = run_cli(tmp_path / "t.duckdb", "import", str(bomb), "--max-mb", "1")
    assert res.code == 1 and "over the 1 MB limit" in res.stderr
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"PK\x03\x04 this is not a zip")
    res2 = run_cli(tmp_path / "t.duckdb", "import", str(garbage))
    assert res2.code == 1 and "not a readable .zip export" in res2.stderr
    folder = tmp_path / "folder"
    folder.mkdir()
    shutil.copy(good, folder / "inner.zip")
    res3 = run_cli(tmp_path / "t.duckdb", "import", str(folder))
    assert res3.code == 1 and "unexpected entry 'inner.zip'" in res3.stderr


def test_an_export_holding_an_impossible_value_is_refused(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:  # fmt: skip
    """The bounds the importers hold at the door (store/bounds.py) hold for an export too: a
    hand-edited Parquet row with a TPOT of 1e9 ms never commits (issue 60)."""
    from tests.vllm import bench_fixtures

    store = tmp_path / "a" / "stepscope.duckdb"
    (path,) = bench_fixtures.write_sweep(tmp_path / "sweep", levels=(4,))
    assert main(["vllm-bench", "--results", str(path), "--store", str(store)]) == 0
    run_id = duckdb.connect(str(store), read_only=True).execute(
        "SELECT run_id FROM runs").fetchone()[0]  # fmt: skip
    good = tmp_path / "good.zip"
    assert main(["export", run_id, "--out", str(good), "--store", str(store)]) == 0

    def tpot(files: dict) -> dict:
        return _with_column(files, "serving_bench", "mean_tpot_ms", [1e9])

    bad = _rewrite(good, tmp_path / "bad.zip", tpot)
    capsys.readouterr()
    target = tmp_path / "t" / "stepscope.duckdb"
    assert main(["import", str(bad), "--store", str(target), "--log-format", "text"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mean_tpot_ms 1e+09 ms is over" in err, err
    assert not target.exists()
