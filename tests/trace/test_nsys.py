"""Issue 43: Nsight Systems SQLite exports through the ``trace`` verb, on real exports of two
nsys eras (tests/fixtures/nsys, hpcgroup/pipit): kernel counts and times as the fixtures'
README lists them, the 2022 schema (``EXPORT_META_DATA``, text that is not UTF-8, NVTX) and
the 2024.5 lazy export (no ``NVTX_EVENTS``); bad input in one line; the recording host."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from store.location import resolve
from store.queries import overview
from tests.helpers import FIXTURES, query, run_cli
from tests.trace.conftest import fixture
from tests.trace.synth import decode_step_trace

NSYS = FIXTURES / "nsys"
CLOVERLEAF = NSYS / "pipit_cloverleaf_nsys2024.5.sqlite"
SAXPY = NSYS / "pipit_saxpy_mpi_nsys2022.2.sqlite"
NOT_NSYS = NSYS / "pipit_not_nsys.sqlite"


def _one_line_refusal(store: Path, res, *needles: str) -> None:
    assert res.code == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert all(n in lines[0] for n in needles), lines[0]
    assert not store.exists() or query(store, "SELECT count(*) FROM runs") == [(0,)]


# (file, kernels, kernel ns, memcpy, NVTX ranges, recording host, nsys version, short names)
REAL = [
    (CLOVERLEAF, 1312, 294_404_540, 279, 0, "nid008553", "2024.5.1.113", 3),
    (SAXPY, 5, 88_573_480, 15, 22, "nid001608", "2022.2.1.31", 1),
]  # fmt: skip


@pytest.mark.parametrize(("path", "kernels", "kernel_ns", "memcpy", "nvtx", "host", "version",
                          "shorts"), REAL, ids=["2024.5", "2022.2"])  # fmt: skip
def test_real_exports_import_with_their_kernel_counts_and_times(
    store_path, path, kernels, kernel_ns, memcpy, nvtx, host, version, shorts
):
    res = run_cli(store_path, "trace", str(path), "--json")
    assert res.code == 0, res.stderr
    out, run = res.json, res.json["run_id"]
    assert out["ranks"] == [0] and out["gpu_events"] == kernels + memcpy
    assert sum(v["calls"] for v in out["categories"].values()) == kernels + memcpy
    got = query(store_path, "SELECT kind, count(*), round(sum(dur_us) * 1000) FROM trace_kernels "
                "WHERE run_id = ? GROUP BY kind ORDER BY kind", [run])  # fmt: skip
    assert got[0] == ("kernel", kernels, kernel_ns) and got[1][:2] == ("memcpy", memcpy)
    # no step range and no graph launch: the capture is the one step; every event in it
    assert (out["steps"], out["step_source"], out["outside_steps"]) == (1, "capture_range", {})
    ((rank_host, env_version, device),) = query(
        store_path, "SELECT r.host, json_extract_string(r.env, '$.trace.nsys_version'), "
        "t.device_name FROM runs r JOIN trace_ranks t USING (run_id) WHERE run_id = ?", [run])  # fmt: skip
    assert (rank_host, env_version) == (host, version) and device.startswith("NVIDIA A100")
    names = query(store_path, "SELECT count(DISTINCT name), count(DISTINCT short_name) FROM "
                  "v_trace_kernel_stats WHERE run_id = ? AND short_name IS NOT NULL", [run])  # fmt: skip
    assert names[0][1] == shorts and names[0][0] >= shorts
    ops = query(store_path, "SELECT events_kept FROM trace_ranks WHERE run_id = ?", [run])[0][0]
    assert ops >= kernels + memcpy + nvtx


def test_a_sqlite_file_that_is_no_export_is_refused_in_one_line(store_path):
    res = run_cli(store_path, "trace", str(NOT_NSYS))
    _one_line_refusal(store_path, res, str(NOT_NSYS), "not an Nsight Systems export")


def test_an_export_without_gpu_events_is_refused_in_one_line(store_path, tmp_path):
    bare = tmp_path / "cpu_only.sqlite"
    shutil.copy(CLOVERLEAF, bare)
    con = sqlite3.connect(bare)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    con.commit()
    con.close()
    res = run_cli(store_path, "trace", str(bare))
    _one_line_refusal(store_path, res, str(bare), "no GPU event")


def test_a_report_without_nsys_on_path_says_the_command(store_path, tmp_path):
    report = tmp_path / "report1.nsys-rep"
    report.write_bytes(b"\x00not a sqlite file: nsys's own format")
    res = run_cli(store_path, "trace", str(report), PATH="/usr/bin:/bin")
    _one_line_refusal(store_path, res, str(report), "nsys export --type sqlite",
                      str(tmp_path / "report1.sqlite"))  # fmt: skip


def test_a_directory_walk_skips_a_sqlite_that_is_no_export(store_path, tmp_path):
    decode_step_trace(tmp_path / "w_rank0.pt.trace.json", rank=0)
    shutil.copy(NOT_NSYS, tmp_path / "notes.sqlite")
    res = run_cli(store_path, "trace", str(tmp_path), "--json")
    assert res.code == 0, res.stderr
    assert "skipped" in res.stderr and "notes.sqlite" in res.stderr
    assert res.json["ranks"] == [0]


def test_kineto_and_nsys_files_of_one_capture_are_one_run(store_path, tmp_path):
    """Several files are one run, whatever their formats: ranks by name, else order."""
    kineto = decode_step_trace(tmp_path / "w_rank0.pt.trace.json", rank=None)
    export = shutil.copy(CLOVERLEAF, tmp_path / "w_rank1.sqlite")
    res = run_cli(store_path, "trace", str(kineto), str(export), "--json")
    assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT rank, rank_source, kernels FROM trace_ranks ORDER BY rank")
    assert rows == [(0, "filename", 9), (1, "filename", 1591)]


def test_an_import_belongs_to_the_host_that_recorded_it(store_path, tmp_path):
    """Item 6: a file's GPUs never become this machine's inventory on the Overview; the run
    is filed under --host, else the host the file names (nsys Hostname, torch's {host}_{pid}
    name), else under `unknown` (issue 57: never this machine, kept as `imported_on`), with
    the file's GPUs shown apart."""
    h100 = fixture("tracelens/h100_qwen1.5_0.5b.json.gz")
    assert run_cli(store_path, "trace", str(h100)).code == 0  # names no host
    named = tmp_path / "gpu-node-7.example_4242.1733000000000000000.pt.trace.json.gz"
    named.write_bytes(gzip.compress(decode_step_trace(tmp_path / "d.json").read_bytes()))
    assert run_cli(store_path, "trace", str(named)).code == 0
    assert run_cli(store_path, "trace", str(CLOVERLEAF)).code == 0
    assert run_cli(store_path, "trace", str(SAXPY), "--host", "login-3").code == 0
    assert run_cli(store_path, "host").code == 0  # this machine's own inventory
    hosts = overview.hosts(resolve(str(store_path))).set_index("host")
    me = query(store_path, "SELECT host FROM runs WHERE verb = 'host'")[0][0]
    assert set(hosts.index) == {me, "unknown", "gpu-node-7.example", "nid008553", "login-3"}
    mine = hosts.loc[me]
    inventory = query(store_path, "SELECT gpu_model, gpu_count FROM runs WHERE verb = 'host'")[0]
    assert (mine["gpu_model"], mine["gpu_count"]) == inventory  # NVML's, not the trace's
    assert mine["gpu_model"] != "NVIDIA H100 80GB HBM3"
    assert pd.isna(mine["imported_gpu_model"])  # the H100 trace is not this machine's
    assert hosts.loc["unknown", "imported_gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert query(store_path, "SELECT imported_on FROM v_runs WHERE host = 'unknown'") == [(me,)]
    assert hosts.loc["nid008553", "imported_gpu_model"] == "NVIDIA A100-SXM4-80GB"
    assert pd.isna(hosts.loc["nid008553", "gpu_model"])  # no inventory taken there
    ((os_name, importer),) = query(store_path, "SELECT os, json_extract_string(env, "
                                   "'$.importer.hostname') FROM runs WHERE host = 'nid008553'")  # fmt: skip
    assert os_name == "SUSE Linux Enterprise Server 15 SP4" and importer == me
