"""Plain collector tables (dicts of lists, lists of dicts) spooled as JSON columns
(store/spool/plain.py): the rows and types Parquet gives, else Parquet."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collectors.comm import nccl_tests_parse
from collectors.inventory import gpu, nvml
from store.commit import commit_entry
from store.connect import connection
from store.location import StoreLocation, resolve
from store.spool import bundle as bundle_mod
from store.spool.bundle import Bundle, RunRecord, read_manifest, utc_now_iso, write_spool
from store.spool.plain import plain_columns
from tests.gpu.conftest import MIXED, NVLINK, PCIE, fake_env
from tests.helpers import FIXTURES, ROOT, cli_env


def _run(verb: str) -> RunRecord:
    now = utc_now_iso()
    return RunRecord(run_id=f"{verb}-plain", verb=verb, host="h", started_at=now, finished_at=now)


def _stored(loc: StoreLocation, tables: dict) -> dict[str, tuple[list, list]]:
    """Each table's column types and rows as the store holds them."""
    out = {}
    with connection(loc, read_only=True) as con:
        for name in tables:
            sql = f"SELECT * EXCLUDE (run_id) FROM {name} ORDER BY ALL"
            types = [r[1] for r in con.execute(f"DESCRIBE {sql}").fetchall()]
            out[name] = (types, con.execute(sql).fetchall())
    return out


def _json_and_parquet(tmp_path: Path, verb: str, tables: dict, monkeypatch) -> None:
    as_json, as_parquet = resolve(tmp_path / "j.duckdb"), resolve(tmp_path / "p.duckdb")
    entry = write_spool(Bundle(_run(verb), tables), as_json.spool_dir)
    manifest = read_manifest(entry)
    assert manifest["format"] == bundle_mod.BUNDLE_FORMAT_JSON
    assert {t["file"].rsplit(".", 1)[1] for t in manifest["tables"].values()} == {"json"}
    commit_entry(as_json, entry)
    with monkeypatch.context() as m:  # the same tables through pyarrow, as before
        m.setattr(bundle_mod, "JSON_MAX_ROWS", 0)
        entry = write_spool(Bundle(_run(verb), tables), as_parquet.spool_dir)
        assert read_manifest(entry)["format"] == bundle_mod.BUNDLE_FORMAT
        commit_entry(as_parquet, entry)
    stored = _stored(as_json, tables)
    assert stored == _stored(as_parquet, tables)
    assert all(rows for _, rows in stored.values())


@pytest.mark.parametrize("spec", [NVLINK, PCIE, MIXED], ids=lambda p: p.stem)
def test_an_nvml_inventory_commits_what_parquet_commits(spec: Path, tmp_path: Path,
                                                        monkeypatch) -> None:  # fmt: skip
    for key, value in fake_env(spec).items():
        monkeypatch.setenv(key, value)
    tables, _ = gpu.tables_for(nvml.topology_inventory())
    assert {"gpu_host", "gpu_devices", "gpu_links"} <= set(tables)
    _json_and_parquet(tmp_path, "gpu", tables, monkeypatch)


def test_a_machine_without_gpus_keeps_its_null_columns(tmp_path: Path, monkeypatch) -> None:
    """No driver: the host row's driver columns are all NULL (pyarrow's null type)."""
    tables, _ = gpu.tables_for(nvml.Topology(None, None, gpus=[], topology=[], p2p={}))
    assert tables["gpu_host"]["driver_version"] == [None]
    _json_and_parquet(tmp_path, "gpu", tables, monkeypatch)


def test_an_nccl_tests_log_commits_what_parquet_commits(tmp_path: Path, monkeypatch) -> None:
    log = FIXTURES / "nccl/h100_8gpu_all_reduce_128M-4G.log"
    parsed = nccl_tests_parse.parse(log.read_text(), log.name)
    rows = [{"op": r.op, "bytes": r.size, "count": r.count, "in_place": ip, "p10_us": None,
             "p50_us": h.time_us, "busbw_gbps": h.busbw_gbps, "wrong": h.wrong}
            for r, ip, h in parsed.halves()]  # fmt: skip
    assert len(rows) > 10
    _json_and_parquet(tmp_path, "nccl-tests", {"comm_results": rows}, monkeypatch)


def test_a_small_import_loads_neither_pandas_nor_pyarrow(tmp_path: Path) -> None:
    """pyarrow imports pandas on its first array (about 0.5 s, half a small import's time):
    the gpu and nccl-tests verbs commit their plain tables without either."""
    code = ("import runpy, sys\n"
            "sys.argv = ['collectors', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('collectors', run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n")  # fmt: skip
    store = tmp_path / "s.duckdb"
    env = {**cli_env(store), **fake_env(NVLINK)}
    log = str(FIXTURES / "nccl/h100_8gpu_all_reduce_128M-4G.log")
    for args in (["gpu"], ["nccl-tests", log, "--host", "gpu-node-1"]):
        out = subprocess.run([sys.executable, "-c", code, *args, "--store", str(store)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[-1] == "[]", (args, out.stdout)
    with connection(resolve(store), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM gpu_links").fetchone()[0] == 64
        assert con.execute("SELECT count(*) FROM comm_results").fetchone()[0] > 10


@pytest.mark.parametrize("table", [
    {"a": [1, 2], "b": [1.0]},  # ragged: pyarrow refuses it itself
    {"a": [[1], [2]]},  # nested
    {"a": [np.int64(1)]},  # a numpy scalar
    {"a": [1.0, math.nan]},  # JSON has no NaN
    {"a": [math.inf]},
    {"a": [True, 2]},  # bool and int: pyarrow refuses the mix
    {"a": [1 << 64]},  # past BIGINT
    {"a": []},  # no rows
    [{"a": 1}, {"b": 2}],  # rows with other keys
    {"a": [1] * 11},  # more rows than allowed
], ids=str)  # fmt: skip
def test_what_plain_json_cannot_hold_exactly_stays_parquet(table) -> None:
    assert plain_columns(table, max_rows=10) is None


def test_plain_types_are_the_ones_parquet_reads_back() -> None:
    table = [{"i": 1, "f": 0.5, "m": 2, "s": "x", "b": True, "n": None},
             {"i": None, "f": 1.5, "m": 2.5, "s": None, "b": False, "n": None}]  # fmt: skip
    got = {k: t for k, (t, _) in plain_columns(table, max_rows=10).items()}
    assert got == {"i": "BIGINT", "f": "DOUBLE", "m": "DOUBLE", "s": "VARCHAR", "b": "BOOLEAN",
                   "n": "INTEGER"}  # fmt: skip
