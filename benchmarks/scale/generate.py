"""Build a Stepscope store at scale with DuckDB SQL alone (``range()``, ``hash()``).

The schema comes from the real migrations (``store.migrate.upgrade``); rows are generated
per table from a TEMP run plan. Trace-bearing runs are written in batches of whole runs
(benchmarks/scale/trace_batch.py: one ``range()`` per batch; 10^9 rows at 0.66 M rows/s on
2 shared cores), each run's rows together and in launch order, so ``trace_kernels`` is
clustered by run like a real store. ``--batch-rows 1``: a transaction per run, as a fleet
commits (more files, slower); ``--batch-rows 0``: the per-run reference path (trace.py).

    # 1,000 runs, 100M kernel rows, embedded
    python -m benchmarks.scale.generate --out benchmarks/out/scale.duckdb
    # 100 runs, 10M kernel rows, DuckLake on a PostgreSQL kept under benchmarks/out/lake
    python -m benchmarks.scale.generate --runs 100 --kernel-rows 10000000 \
        --lake benchmarks/out/lake
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from benchmarks.scale import experts, serving, tables, trace, trace_batch
from benchmarks.scale import runs as runs_mod
from store import migrate

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "out"


@dataclass
class BuildReport:
    runs: int
    kernel_rows: int
    trace_runs: int
    seconds: dict[str, float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    size_bytes: int | None = None


def tune(con: duckdb.DuckDBPyConnection, memory_limit: str, threads: int) -> None:
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET threads = {int(threads)}")
    con.execute("SET preserve_insertion_order = true")


def build(
    con: duckdb.DuckDBPyConnection,
    runs: int,
    kernel_rows: int,
    rank_steps: int = 256,
    seed: int = 7,
    batch_rows: int = 20_000_000,
    progress: Callable[[str], None] | None = None,
    hosts: int = runs_mod.HOSTS,
) -> BuildReport:
    """Fill an empty store (embedded or lake cursor with ``USE lake`` done)."""
    say = progress or (lambda _msg: None)
    report = BuildReport(runs, kernel_rows, 0)
    t0, cpu0 = time.perf_counter(), time.process_time()
    migrate.upgrade(con)
    if con.execute("SELECT count(*) FROM runs").fetchone()[0]:
        raise SystemExit("the store already has runs: give a new --out")
    report.seconds["migrate"] = time.perf_counter() - t0

    def step(name: str, fn: Callable[[], None]) -> None:
        start = time.perf_counter()
        con.execute("BEGIN TRANSACTION")
        fn()
        con.execute("COMMIT")
        report.seconds[name] = round(time.perf_counter() - start, 2)
        say(f"{name}: {report.seconds[name]:.1f} s")

    runs_mod.create_plan(con, runs, seed, hosts)
    trace.create_template(con)
    step("runs", lambda: runs_mod.insert_runs(con))
    step("host+gpu", lambda: tables.insert_host_and_gpu(con))
    step("comm", lambda: tables.insert_comm(con))
    step("serving", lambda: (serving.insert_bench(con), serving.insert_profile_servers(con),
                             serving.insert_sglang_servers(con),
                             serving.insert_model_configs(con), serving.insert_metrics(con)))  # fmt: skip
    step("expert-load", lambda: experts.insert(con))
    plan = trace.trace_runs(con, kernel_rows, rank_steps)
    report.trace_runs = len(plan)
    start, done, rows = time.perf_counter(), 0, 0
    # Many runs per statement and transaction (trace_batch.py); batch_rows=0: one run at a
    # time (trace.insert_run, the reference the batched rows are tested against).
    groups = trace_batch.batches(plan, batch_rows) if batch_rows else ([r] for r in plan)
    for group in groups:
        con.execute("BEGIN TRANSACTION")
        if batch_rows:
            trace_batch.insert_batch(con, group)
        else:
            trace.insert_run(con, group[0])
        con.execute("COMMIT")
        done, rows = done + len(group), rows + sum(r.rows for r in group)
        rate = rows / (time.perf_counter() - start)
        say(f"trace runs {done}/{len(plan)} ({rate / 1e6:.2f} M rows/s)")
    report.seconds["trace"] = round(time.perf_counter() - start, 2)
    for temp in ("ev", "tb_agg", "tb_a", "tb_run"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    report.seconds["total"] = round(time.perf_counter() - t0, 2)
    report.seconds["cpu_total"] = round(time.process_time() - cpu0, 2)  # all DuckDB threads
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "AND table_schema = current_schema() AND table_catalog = current_database() "
        "ORDER BY table_name").fetchall()]  # fmt: skip
    for name in names:
        report.rows[name] = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
    return report


def record_check(store: str, report: BuildReport) -> None:
    """The real ``collectors check`` over the generated runs, as cron runs it nightly: its
    findings (check_findings, check_points) are what the Overview and Trends pages read."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "collectors", "check", "--store", store],
                          cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
    if done.returncode not in (0, 3):  # 3: a regression found, the store is fine
        raise SystemExit(f"collectors check on {store} failed: {done.stderr.strip()[-500:]}")
    report.seconds["check"] = round(time.perf_counter() - start, 2)


def build_file(path: Path, runs: int, kernel_rows: int, memory_limit: str = "6GB",
               threads: int = 2, **kw) -> BuildReport:  # fmt: skip
    """A new embedded DuckDB store at ``path`` (refuses to overwrite)."""
    if path.exists():
        raise SystemExit(f"{path} exists: remove it or choose another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    try:
        tune(con, memory_limit, threads)
        report = build(con, runs, kernel_rows, **kw)
        start = time.perf_counter()
        con.execute("CHECKPOINT")
        report.seconds["checkpoint"] = round(time.perf_counter() - start, 2)
    finally:
        con.close()
    record_check(str(path), report)
    report.size_bytes = path.stat().st_size
    return report


def build_lake(url: str, runs: int, kernel_rows: int, memory_limit: str = "6GB",
               threads: int = 2, **kw) -> BuildReport:  # fmt: skip
    """A new DuckLake store at ``url`` (``ducklake:postgres:...;data_path=DIR``)."""
    from store.lake import catalog as lake
    from store.location import resolve

    loc = resolve(url)
    con = lake.open_private(loc, read_only=False)
    try:
        tune(con, memory_limit, threads)
        report = build(con, runs, kernel_rows, **kw)
    finally:
        con.close()
    record_check(url, report)
    if loc.data_path and not lake.is_remote(loc.data_path):
        report.size_bytes = sum(f.stat().st_size for f in Path(loc.data_path).rglob("*")
                                if f.is_file())  # fmt: skip
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT / "scale.duckdb")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--kernel-rows", type=int, default=100_000_000)
    ap.add_argument("--rank-steps", type=int, default=256,
                    help="ranks x steps per trace run (8 ranks x 32 steps)")  # fmt: skip
    ap.add_argument("--memory-limit", default="6GB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hosts", type=int, default=16, help="hosts the runs come from")
    ap.add_argument("--batch-rows", type=int, default=20_000_000,
                    help="kernel rows per trace batch (one transaction); 1: a run each; "
                    "0: the per-run reference path")  # fmt: skip
    ap.add_argument("--lake", metavar="DIR", type=Path,
                    help="build a DuckLake store instead: its PostgreSQL cluster and data "
                    "files go under DIR (benchmarks/scale/pg.py restarts it later)")  # fmt: skip
    ap.add_argument("--report", type=Path, help="write the build report (JSON) here")
    args = ap.parse_args(argv)
    kw = dict(rank_steps=args.rank_steps, memory_limit=args.memory_limit, threads=args.threads,
              hosts=args.hosts, batch_rows=args.batch_rows,
              progress=lambda m: print(m, file=sys.stderr, flush=True))  # fmt: skip
    if args.lake:
        from benchmarks.scale import pg

        url = pg.lake_url(pg.start(args.lake), args.lake)
        try:
            report = build_lake(url, args.runs, args.kernel_rows, **kw)
            print(f"lake URL: {url}", file=sys.stderr)
        finally:
            pg.stop(args.lake)
    else:
        report = build_file(args.out, args.runs, args.kernel_rows, **kw)
    text = json.dumps(asdict(report), indent=2)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
