"""The ``runs`` table of the scale store, built from ``range()`` in one INSERT.

A TEMP table ``plan`` holds one row per run (index, verb, host, run id, times, status);
every other table is generated from it. Runs are spread over 30 days, oldest first, except
``vllm-metrics`` scrapes: one a minute per server over the last hour or so, as cron does.
"""

from __future__ import annotations

import json

import duckdb

from benchmarks.scale.catalog import HOST_CLASSES, HOSTS, KERNEL_VERBS, verb_cycle

IMPORT_VERBS = ("trace", "nccl-tests")  # content-addressed ids (store.spool.bundle.content_run_id)
METRIC_SERVERS = 4  # vllm-metrics scrapes host-00 .. host-03


def env_json(host_class: int) -> str:
    """A realistic environment snapshot (the collectors record the whole thing)."""
    hc = HOST_CLASSES[host_class]
    env = {
        "hostname": "HOST", "os": "Ubuntu 24.04.1 LTS (Linux 6.8.0-60-generic x86_64)",
        "cpu": "AMD EPYC 9555 64-Core Processor", "cpu_count": 256,
        "mem_bytes": 1_622_000_000_000, "python": "3.12.3", "torch": "2.9.0+cu130",
        "nccl": "2.27.7", "cuda_driver": "580.95.05", "cuda": "13.0",
        "gpu_model": hc.gpu_model, "gpu_count": 8, "vllm": "0.11.2",
        "stepscope_version": "0.1.0",
        "env": {f"NCCL_{k}": v for k, v in (("DEBUG", "WARN"), ("P2P_LEVEL", "SYS"),
                                            ("IB_DISABLE", "1"), ("MIN_NCHANNELS", "4"))},
        "cuda_visible_devices": "0,1,2,3,4,5,6,7",
    }  # fmt: skip
    return json.dumps(env)


def create_plan(con: duckdb.DuckDBPyConnection, runs: int, seed: int, hosts: int = HOSTS) -> None:
    """TEMP table ``plan``: one row per run, with its absolute run id and times, spread over
    ``hosts`` hosts (host-00 ..)."""
    cycle = verb_cycle()
    con.execute(
        "CREATE OR REPLACE TEMP TABLE plan AS "
        "WITH b AS (SELECT i::INTEGER AS idx, list_extract(?::VARCHAR[], (i % 100)::INTEGER + 1) "
        "  AS verb, hash(?::BIGINT, i) AS h FROM range(?) t(i)), "
        "m AS (SELECT idx, row_number() OVER (ORDER BY idx) - 1 AS k, "
        "  count(*) OVER () AS n FROM b WHERE verb = 'vllm-metrics'), "
        "t AS (SELECT idx, row_number() OVER (ORDER BY idx) - 1 AS t FROM b "
        "  WHERE list_contains(?::VARCHAR[], verb)), "
        "c AS (SELECT b.*, m.k AS scrape, m.n AS scrapes, t.t AS trace_idx, "
        "  CASE WHEN b.verb = 'vllm-metrics' THEN (m.k % ?)::INTEGER "
        "       ELSE ((b.idx * 7 + b.idx // 100) % ?)::INTEGER END AS host_idx, "
        "  CASE WHEN b.verb = 'vllm-metrics' "
        "       THEN now() - to_minutes(((m.n - m.k) // ? + 1)::BIGINT) "
        "       ELSE now() - to_seconds(((?::BIGINT - b.idx) * 2592000 // ?)::BIGINT + 3600) END "
        "  AS started_at FROM b LEFT JOIN m USING (idx) LEFT JOIN t USING (idx)) "
        "SELECT *, 'host-' || lpad(host_idx::VARCHAR, 2, '0') AS host, host_idx % 4 AS hclass, "
        "  CASE WHEN list_contains(?::VARCHAR[], verb) "
        "       THEN verb || '-' || substr(md5(h::VARCHAR), 1, 16) "
        "       ELSE strftime(started_at AT TIME ZONE 'UTC', '%Y%m%dT%H%M%SZ') || '-' || verb "
        "            || '-' || substr(md5(h::VARCHAR), 1, 8) END AS run_id, "
        "  CASE WHEN verb IN ('gpu', 'comm', 'vllm-bench', 'host') AND h % 25 = 0 THEN 'failed' "
        "       WHEN list_contains(?::VARCHAR[], verb) AND h % 30 = 1 THEN 'partial' "
        "       ELSE 'ok' END AS status "
        "FROM c ORDER BY idx",
        [cycle, seed, runs, list(KERNEL_VERBS), METRIC_SERVERS, hosts, METRIC_SERVERS,
         runs, runs, list(IMPORT_VERBS), list(KERNEL_VERBS)],
    )  # fmt: skip


def insert_runs(con: duckdb.DuckDBPyConnection) -> None:
    envs = [env_json(i) for i in range(len(HOST_CLASSES))]
    models = "['moonshotai/Kimi-K2.5', 'deepseek-ai/DeepSeek-V3', 'MiniMaxAI/MiniMax-M2.5']"
    con.execute(
        "INSERT INTO runs (run_id, verb, label, host, started_at, finished_at, status, message, "
        "hostname, os, cpu, cpu_count, mem_bytes, python, torch, nccl, cuda_driver, cuda, "
        "gpu_model, gpu_count, vllm, stepscope_version, args, env, committed_at) "
        "SELECT p.run_id, p.verb, "
        "  CASE p.idx % 4 WHEN 0 THEN NULL WHEN 1 THEN 'nightly' WHEN 2 THEN 'tp8-baseline' "
        "  ELSE 'ep-trial-' || (p.idx % 13)::VARCHAR END, "
        "  p.host, p.started_at, "
        "  p.started_at + to_milliseconds((CASE WHEN p.verb = 'vllm-metrics' THEN 80 "
        "    ELSE 4000 + p.h % 600000 END)::BIGINT), "
        "  p.status, "
        "  CASE p.status WHEN 'failed' THEN 'NVML: driver/library version mismatch' "
        "    WHEN 'partial' THEN 'rank 3: trace file ended early (.tmp), complete events kept' "
        "  END, "
        "  p.host, 'Ubuntu 24.04.1 LTS (Linux 6.8.0-60-generic x86_64)', "
        "  'AMD EPYC 9555 64-Core Processor', 256, 1622000000000, '3.12.3', '2.9.0+cu130', "
        "  '2.27.7', '580.95.05', '13.0', "
        "  list_extract(?::VARCHAR[], p.hclass + 1), 8, "
        "  CASE WHEN p.verb LIKE 'vllm-%' THEN '0.11.2' END, '0.1.0', "
        f"  CASE WHEN p.verb IN ('vllm-bench', 'vllm-profile', 'sglang-profile') THEN json_object('model', "
        f"    list_extract({models}, p.idx % 3 + 1), 'url', 'http://127.0.0.1:8000') "
        "    WHEN p.verb = 'profile' THEN json_object('model', 'kimi-k2.5', 'tp', 8, "
        "      'steps', 32) "
        "    WHEN p.verb = 'trace' THEN json_object('paths', ['/data/traces/' || p.run_id]) "
        "    ELSE json_object('store', NULL) END::VARCHAR, "
        "  replace(list_extract(?::VARCHAR[], p.hclass + 1), '\"HOST\"', '\"' || p.host || '\"'), "
        "  p.started_at + INTERVAL 5 SECOND "
        "FROM plan p ORDER BY p.idx",
        [[hc.gpu_model for hc in HOST_CLASSES], envs],
    )  # fmt: skip
