"""`python -m collectors check` over 1,000 runs: wall time as a user runs it (a fresh
process, median of N), and where the time goes in-process.

Two stores of one host benchmarked night after night, built with the real migrations and
filled with SQL (as benchmarks/scale/ does; the commit path is benchmarked elsewhere):

- ``mixed``: 40% vllm-bench sweeps (4 concurrencies), 30% nccl-tests all_reduce imports
  (8 sizes), 30% decode traces (64 rank x steps, 6 categories): 39 series, every family.
- ``serving``: every run a vllm-bench sweep: 16 series of 1,000 points, the detection's
  worst case.

TPOT, latency and MoE time rise 10% at 70% of the history, with a vLLM/NCCL upgrade there.

    python -m benchmarks.check_speed --runs 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from store import migrate

ROOT = Path(__file__).resolve().parents[1]
NOISE = "(1 + 0.02 * (random() - 0.5) * 3.4)"  # ~2% run-to-run spread
CATEGORIES = {"gemm": 900.0, "moe": 2400.0, "attention": 700.0, "norm": 120.0,
              "allreduce": 1100.0, "elementwise": 150.0}  # us per decode step  # fmt: skip


def _runs(con: duckdb.DuckDBPyConnection, verb: str, n: int, offset: int, step_at: int) -> None:
    """``n`` nightly runs of ``verb``, night ``offset + i``; upgraded from run ``step_at``."""
    con.execute(
        "INSERT INTO runs (run_id, verb, host, started_at, finished_at, status, torch, nccl, "
        "vllm, env) SELECT printf('%05d-%s-nightly', ? + i, ?), ?, 'nightly', "
        "TIMESTAMPTZ '2024-01-01 02:00:00+00' + to_days((? + i)::INTEGER), "
        "TIMESTAMPTZ '2024-01-01 02:10:00+00' + to_days((? + i)::INTEGER), 'ok', '2.8.0', "
        "CASE WHEN i >= ? THEN '2.28.3' ELSE '2.27.3' END, "
        "CASE WHEN i >= ? THEN '0.11.1' ELSE '0.11.0' END, '{}' FROM range(?) t(i)",
        [offset, verb, verb, offset, offset, step_at, step_at, n],
    )


def _upgraded(verb: str) -> str:
    return f"(SELECT run_id, vllm = '0.11.1' AS up FROM runs WHERE verb = '{verb}')"


def build(path: Path, serving: int, comm: int, trace: int) -> None:
    con = duckdb.connect(str(path))
    try:
        migrate.upgrade(con)
        _runs(con, "vllm-bench", serving, 0, int(serving * 0.7))
        _runs(con, "nccl-tests", comm, serving, int(comm * 0.7))
        _runs(con, "trace", trace, serving + comm, int(trace * 0.7))
        con.execute(
            "INSERT INTO serving_bench (run_id, source, model_id, num_prompts, max_concurrency, "
            "concurrency, input_len, output_len, median_tpot_ms, median_itl_ms, "
            "median_ttft_ms, output_throughput, tp, pp, dp, ep, layout, layout_kind, engine, "
            "engine_version) "
            "SELECT run_id, 'sweep', 'deepseek-ai/DeepSeek-V3', c * 10, c, c, 1024, 128, "
            f"tpot, tpot * 0.98, 250 * {NOISE}, c * 1000 / tpot, 8, 1, 1, true, 'TP8+EP', "
            "'tp_ep_dp1', 'vllm', CASE WHEN up THEN '0.11.1' ELSE '0.11.0' END FROM ("
            f"SELECT r.*, c, 40 * {NOISE} * CASE WHEN r.up THEN 1.10 ELSE 1.0 END AS tpot "
            f"FROM {_upgraded('vllm-bench')} r, (SELECT unnest([8, 16, 32, 64]) AS c) cs)"
        )
        con.execute(
            "INSERT INTO comm_meta (run_id, source, backend, world_size, device, graph_mode, "
            "nccl_version) SELECT run_id, 'nccl-tests', 'nccl', 8, 'cuda', false, "
            f"CASE WHEN up THEN '2.28.3' ELSE '2.27.3' END FROM {_upgraded('nccl-tests')}"
        )
        con.execute(
            "INSERT INTO comm_results (run_id, op, dtype, bytes, count, in_place, iters, "
            "p50_us, mean_us, algbw_gbps, busbw_gbps) "
            "SELECT run_id, 'all_reduce', 'bf16', b, b // 2, ip, 20, us, us, b / us / 1e3, "
            "b / us / 1e3 * 1.75 FROM ("
            f"SELECT r.*, ip, b, (20 + b / 2e5) * {NOISE} * CASE WHEN r.up THEN 1.10 ELSE 1.0 "
            f"END AS us FROM {_upgraded('nccl-tests')} r, (SELECT unnest([false, true]) AS ip) h, "
            "(SELECT (1 << (16 + 2 * k)) AS b FROM range(8) t(k)) s)"
        )
        con.execute(
            "INSERT INTO trace_ranks (run_id, rank, world_size, kernels, has_gpu, steps, "
            "step_source) SELECT r.run_id, k, 8, 1000, true, 8, 'vllm' "
            f"FROM {_upgraded('trace')} r, range(8) t(k)"
        )
        # one noise factor per run and category (run-to-run), the same on every rank x step
        factors = ", ".join(f"{NOISE} * CASE WHEN '{c}' = 'moe' AND up THEN 1.10 ELSE 1.0 END "
                            f"AS {c}" for c in CATEGORIES)  # fmt: skip
        parts = " + ".join(f"{us} * f.{c}" for c, us in CATEGORIES.items())
        con.execute(
            "CREATE TEMP TABLE steps AS SELECT f.run_id, k AS rank, s AS step, "
            f"{', '.join(f'{us} * f.{c} AS {c}' for c, us in CATEGORIES.items())}, "
            f"{parts} + 200 AS wall_us FROM (SELECT run_id, {factors} "
            f"FROM {_upgraded('trace')}) f, range(8) t(k), range(8) u(s)"
        )
        con.execute(
            "INSERT INTO trace_steps (run_id, rank, step, name, source, start_us, wall_us, "
            "busy_us, context_tokens, generation_tokens, context_requests, generation_requests) "
            "SELECT run_id, rank, step, 'execute_context_0(0)_generation_32(32)', 'vllm', "
            "step * 10000.0, wall_us, wall_us - 200, 0, 32, 0, 32 FROM steps"
        )
        for c in CATEGORIES:
            con.execute(
                "INSERT INTO trace_step_categories (run_id, rank, step, category, calls, total_us) "
                f"SELECT run_id, rank, step, '{c}', 60, {c} FROM steps"
            )
    finally:
        con.close()


def cli_wall_s(store: Path, repeat: int) -> tuple[float, float, dict]:
    """Median wall and CPU (user + system) seconds of ``python -m collectors check --json``
    in a fresh process. CPU says what a quiet host would see: this box is shared."""
    env = {**os.environ, "STEPSCOPE_STORE": str(store), "PYTHONPATH": str(ROOT)}
    times, cpus, out = [], [], {}
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "collectors", "check", "--json",
                               "--log-format", "text"], cwd=ROOT, env=env, capture_output=True,
                              text=True)  # fmt: skip
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode not in (0, 3):
            raise SystemExit(f"check failed ({proc.returncode}): {proc.stderr}")
        out = json.loads(proc.stdout)
    return statistics.median(times), statistics.median(cpus), out


def phases(store: Path) -> dict[str, float]:
    """In-process seconds of check's two parts on a warm process (imports done)."""
    from analysis import trends
    from store.location import resolve
    from store.queries import series as queries_series
    from store.reader import clear_cache

    loc = resolve(store)
    start = time.perf_counter()
    import ruptures  # noqa: F401 - its import (scipy) is part of the CLI's wall, not of detect_s

    import_s = time.perf_counter() - start
    queries_series.series_points(loc)  # first connection
    clear_cache()
    start = time.perf_counter()
    points = queries_series.series_points(loc)
    query_s = time.perf_counter() - start
    start = time.perf_counter()
    trends.findings(trends.analyse(points))
    detect_s = time.perf_counter() - start
    return {"ruptures_import_s": import_s, "query_s": query_s, "detect_s": detect_s,
            "points": len(points)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    n = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"mixed": (int(n * 0.4), int(n * 0.3), n - int(n * 0.4) - int(n * 0.3)),
                  "serving": (n, 0, 0)}  # fmt: skip
        for name, (serving, comm, trace) in stores.items():
            store = Path(tmp) / f"{name}.duckdb"
            build(store, serving, comm, trace)
            wall, cpu, out = cli_wall_s(store, args.repeat)
            row = {"store": name, "runs": n, "series": out["series"],
                   "regressions": len(out["regressions"]),
                   "improvements": len(out["improvements"]), "cli_wall_s": round(wall, 3), "cli_cpu_s": round(cpu, 3),
                   **{k: round(v, 3) for k, v in phases(store).items()}}  # fmt: skip
            print(json.dumps(row), flush=True)
            print(f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
