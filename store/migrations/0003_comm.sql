-- 0003: collective benchmarks (`comm`) and imported nccl-tests runs, one schema for both.
-- Bandwidth in GB/s (1e9 B/s) as nccl-tests prints it; times in microseconds.
CREATE TABLE comm_meta (
    run_id VARCHAR NOT NULL,
    source VARCHAR,                   -- comm | nccl-tests
    backend VARCHAR,                  -- nccl | gloo
    world_size INTEGER,               -- ranks in the collective (NULL: a log that cannot say)
    device VARCHAR,                   -- cuda | cpu
    graph_mode BOOLEAN,               -- timed as CUDA-graph replays (comm --graph, nccl-tests -G)
    nccl_version VARCHAR,
    nccl_env VARCHAR,                 -- JSON object of the NCCL_* variables in force
    interconnect VARCHAR,             -- pcie-only | nvlink | mixed | none | unknown
    gpu_names VARCHAR,                -- distinct GPU models, ' + ' separated
    file VARCHAR,                     -- nccl-tests: the imported file's path
    nccl_tests_version VARCHAR,       -- nccl-tests: version line, or the inferred era
    avg_busbw_gbps DOUBLE,            -- mean busbw over both halves of every row
    footer_avg_busbw_gbps DOUBLE      -- nccl-tests: its own "# Avg bus bandwidth" (NULL: absent)
);

CREATE TABLE comm_results (
    run_id VARCHAR NOT NULL,
    op VARCHAR,                       -- all_reduce | all_to_all | all_gather | reduce_scatter | ...
    dtype VARCHAR,                    -- bf16 | fp16 | fp32 | ... (nccl-tests names normalised)
    tokens_per_rank INTEGER,          -- serving sizing: tokens per GPU (NULL for byte sweeps)
    hidden INTEGER,                   -- hidden size used with tokens_per_rank
    bytes BIGINT,                     -- nccl-tests' `size` convention (docs/schema.md)
    count BIGINT,                     -- elements, as nccl-tests' `count`
    in_place BOOLEAN,
    iters INTEGER,
    p50_us DOUBLE,                    -- nccl-tests: its one (mean) time
    p10_us DOUBLE,
    p90_us DOUBLE,
    min_us DOUBLE,
    mean_us DOUBLE,
    algbw_gbps DOUBLE,
    busbw_gbps DOUBLE,
    wrong BIGINT                      -- elements that failed the check (NULL: not checked)
);

CREATE VIEW v_comm_results AS
SELECT r.run_id, r.op, r.dtype, r.tokens_per_rank, r.hidden, r.bytes, r.count, r.in_place,
       r.iters, r.p50_us, r.p10_us, r.p90_us, r.min_us, r.mean_us, r.algbw_gbps, r.busbw_gbps,
       r.wrong,
       u.host, u.label, u.finished_at, u.verb,
       m.source, m.backend, m.world_size, m.device, m.interconnect, m.graph_mode
FROM comm_results r
JOIN runs u ON u.run_id = r.run_id
LEFT JOIN comm_meta m ON m.run_id = r.run_id;
