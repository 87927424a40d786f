"""The collector CLI as a user runs it: verbs, flags, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers import query, run_cli


def test_help_lists_every_verb_with_purpose(store_path: Path) -> None:
    from collectors.cli import VERBS

    result = run_cli(store_path, "--help")
    assert result.code == 0
    for verb in VERBS:
        assert verb.name in result.stdout and verb.help[:30] in result.stdout.replace("\n", " ")


def test_no_verb_is_usage_error(store_path: Path) -> None:
    assert run_cli(store_path).code == 2


def test_unknown_flag_is_usage_error(store_path: Path) -> None:
    result = run_cli(store_path, "host", "--no-such-flag")
    assert result.code == 2 and "--no-such-flag" in result.stderr


def test_host_snapshot_commits_this_machine(store_path: Path) -> None:
    result = run_cli(store_path, "host", "--json", "--label", "first")
    assert result.code == 0, result.stderr
    summary = result.json
    assert summary["committed"] is True and summary["host"] == os.uname().nodename
    rows = query(
        store_path,
        "SELECT verb, label, status, hostname, python, stepscope_version, cpu_count, mem_bytes, "
        "env, args FROM runs WHERE run_id = ?",
        [summary["run_id"]],
    )
    verb, label, status, hostname, python, version, cpus, mem, env, args = rows[0]
    assert (verb, label, status, hostname) == ("host", "first", "ok", os.uname().nodename)
    assert python and version and cpus >= 1 and mem > 0
    assert json.loads(env)["hostname"] == hostname
    assert json.loads(args)["label"] == "first"


def test_host_without_gpu_says_so_and_records_zero(store_path: Path) -> None:
    result = run_cli(store_path, "host", "--json")
    assert result.code == 0
    if result.json["gpu_count"] == 0:  # this machine has no NVIDIA GPU
        assert "no GPUs recorded" in result.stderr
        (msg,) = query(store_path, "SELECT message FROM runs")[0]
        assert "NVIDIA" in msg or "NVML" in msg


def test_dry_run_commits_nothing(store_path: Path) -> None:
    result = run_cli(store_path, "host", "--dry-run", "--json")
    assert result.code == 0 and result.json["committed"] is False
    assert not store_path.exists()


def test_json_logs_when_asked(store_path: Path) -> None:
    result = run_cli(store_path, "host", "--log-format", "json")
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert lines and all({"ts", "level", "msg"} <= set(line) for line in lines)


def test_store_path_that_is_a_directory_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "adir"
    bad.mkdir()
    result = run_cli(bad, "host")
    assert result.code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) <= 2 and "Traceback" not in result.stderr
    assert str(bad) in result.stderr


def test_store_path_that_is_a_csv_file_is_one_clear_line(tmp_path: Path) -> None:
    """DuckDB 1.5 would open a CSV as an in-memory database of views, so a commit there
    would keep nothing (store/location.py check_duckdb_file)."""
    from tests.helpers import FIXTURES

    csv = tmp_path / "runs.csv"
    csv.write_text("run_id,verb\nr1,host\n")
    trace = FIXTURES / "traces" / "tracelens" / "vllm_mi300x_decode_fullgraph_bs32.json.gz"
    for args in (("host",), ("trace", str(trace)), ("flush",)):
        result = run_cli(csv, *args)
        assert result.code == 1, args
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert f"store {csv} is not a DuckDB database file" in lines[0]
    assert csv.read_text() == "run_id,verb\nr1,host\n"


def test_flush_with_nothing_pending(store_path: Path) -> None:
    result = run_cli(store_path, "flush", "--json")
    assert result.code == 0 and result.json["committed"] == []
    assert "nothing pending" in result.stderr


def test_flush_of_a_backlog_says_a_count_and_the_first_runs(store_path: Path) -> None:
    """A host cut off from the store for a day has a long backlog: the text names how many
    runs were committed and the first five, --json every one."""
    from store.location import resolve
    from store.spool.bundle import Bundle, RunRecord, write_spool

    spool = resolve(str(store_path)).spool_dir
    ids = [f"20261201T00000{i}Z-host-{i:08x}" for i in range(7)]
    for run_id in ids:
        now = "2026-12-01T00:00:00+00:00"
        write_spool(Bundle(RunRecord(run_id, "host", "gpu-node-1", now, now)), spool)
    result = run_cli(store_path, "flush", "--json", "--log-format", "text")
    assert result.code == 0, result.stderr
    assert sorted(result.json["committed"]) == ids
    line = next(x for x in result.stderr.splitlines() if "committed 7 run(s): " in x)
    shown = line.split("committed 7 run(s): ", 1)[1]
    assert shown.endswith(" and 2 more") and len(shown.split(", ")) == 5


# Runs `python -m collectors` as the CLI does, then reports numpy's BLAS threads at exit.
# The process's threads at exit, after up to 2 s for ones that are ending (the verb's gzip
# reader, a daemon, can still be an OS thread on a loaded machine); BLAS's threads never end.
_BLAS_AT_EXIT = (
    "import atexit, os, runpy, sys, time\n"
    "def tasks():\n"
    "    end = time.monotonic() + 2\n"
    "    while len(os.listdir('/proc/self/task')) > 1 and time.monotonic() < end:\n"
    "        time.sleep(0.05)\n"
    "    return len(os.listdir('/proc/self/task'))\n"
    "atexit.register(lambda: print('blas', os.environ.get('OPENBLAS_NUM_THREADS'),\n"
    "    'numpy' in sys.modules, tasks()))\n"
    "sys.argv = ['collectors', *sys.argv[1:]]\n"
    "runpy.run_module('collectors', run_name='__main__')\n"
)


def test_an_import_verb_starts_no_blas_threads_unless_the_user_asked(store_path: Path) -> None:
    """numpy's OpenBLAS would start a thread per core at import (collectors/cli.py
    single_threaded_blas): an import verb runs on its one thread, a user's setting stays."""
    import subprocess
    import sys

    from tests.helpers import FIXTURES, ROOT

    trace = FIXTURES / "traces" / "tracelens" / "vllm_mi300x_decode_fullgraph_bs32.json.gz"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",
                                                            "OMP_NUM_THREADS")}  # fmt: skip
    env.update(PYTHONPATH=str(ROOT), STEPSCOPE_STORE=str(store_path))
    for users, expect in ((None, "1"), ("2", "2")):
        if users:
            env["OPENBLAS_NUM_THREADS"] = users
        done = subprocess.run([sys.executable, "-c", _BLAS_AT_EXIT, "trace", "--dry-run",
                               str(trace)], env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        word, value, numpy_loaded, threads = done.stdout.splitlines()[-1].split()
        assert (word, value, numpy_loaded) == ("blas", expect, "True")
        if users is None:
            assert threads == "1"
