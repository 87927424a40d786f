-- 0015 (issue 57): a run is filed under the host that recorded it, never the machine that
-- imported its files. `imported_on` is that machine for imports (`trace`, `nccl-tests`: the
-- run's environment records it as `imported_on`); NULL for runs measured on their own host.
-- Imports made before this migration were filed under `hostname`, the importing machine: it
-- stands in, so they can be found and named (`python -m collectors relabel RUN_ID --host NAME`).
-- A view, not a new `runs` column: on a fresh DuckLake, adding a column to `runs` made the
-- next `compact` fail (it looked for an inlined-data table of the old schema version that was
-- never created; duckdb-extension-ducklake for duckdb 1.5.5).

CREATE OR REPLACE VIEW v_runs AS
SELECT run_id, verb, label, host, started_at, finished_at,
       date_diff('millisecond', started_at, finished_at) / 1000.0 AS duration_s,
       status, message, hostname, os, cpu, cpu_count, mem_bytes, python, torch, nccl,
       cuda_driver, cuda, gpu_model, gpu_count, vllm, stepscope_version, args, committed_at,
       coalesce(json_extract_string(env, '$.imported_on'),
                CASE WHEN verb IN ('trace', 'nccl-tests') THEN hostname END) AS imported_on
FROM runs;

-- The GPUs a comm curve was measured on: a curve stands only for those (planner.cost.comm).
CREATE OR REPLACE VIEW v_comm_results AS
SELECT r.run_id, r.op, r.dtype, r.tokens_per_rank, r.hidden, r.bytes, r.count, r.in_place,
       r.iters, r.p50_us, r.p10_us, r.p90_us, r.min_us, r.mean_us, r.algbw_gbps, r.busbw_gbps,
       r.wrong,
       u.host, u.label, u.finished_at, u.verb,
       m.source, m.backend, m.world_size, m.device, m.interconnect, m.graph_mode,
       r.burst_us, r.burst_algbw_gbps, r.burst_busbw_gbps,
       CASE WHEN m.source = 'nccl-tests' THEN r.p50_us ELSE r.burst_us END AS nccl_tests_us,
       CASE WHEN m.source = 'nccl-tests' THEN r.busbw_gbps ELSE r.burst_busbw_gbps END
           AS nccl_tests_busbw_gbps,
       m.gpus_used, m.timing, m.gpu_names
FROM comm_results r
JOIN runs u ON u.run_id = r.run_id
LEFT JOIN comm_meta m ON m.run_id = r.run_id;
