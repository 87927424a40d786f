-- 0001: the runs table every collector writes, and the public views over it.
-- No PRIMARY KEY/UNIQUE: DuckLake has none, so run-id idempotency lives in store/commit.py.
CREATE TABLE runs (
    run_id VARCHAR NOT NULL,          -- absolute id, safe to put in links
    verb VARCHAR NOT NULL,            -- collector verb that produced the run
    label VARCHAR,                    -- user's --label
    host VARCHAR NOT NULL,            -- host the measurement is about
    started_at TIMESTAMP WITH TIME ZONE NOT NULL,
    finished_at TIMESTAMP WITH TIME ZONE,
    status VARCHAR NOT NULL,          -- ok | partial | failed
    message VARCHAR,                  -- one line: why partial/failed, or a note
    hostname VARCHAR,                 -- machine the collector ran on
    os VARCHAR,
    cpu VARCHAR,
    cpu_count INTEGER,
    mem_bytes BIGINT,
    python VARCHAR,
    torch VARCHAR,
    nccl VARCHAR,
    cuda_driver VARCHAR,
    cuda VARCHAR,
    gpu_model VARCHAR,
    gpu_count INTEGER,
    vllm VARCHAR,
    stepscope_version VARCHAR,
    args VARCHAR,                     -- JSON object of the collector's arguments
    env VARCHAR,                      -- JSON object: the full environment snapshot
    committed_at TIMESTAMP WITH TIME ZONE
);

CREATE VIEW v_runs AS
SELECT run_id, verb, label, host, started_at, finished_at,
       date_diff('millisecond', started_at, finished_at) / 1000.0 AS duration_s,
       status, message, hostname, os, cpu, cpu_count, mem_bytes, python, torch, nccl,
       cuda_driver, cuda, gpu_model, gpu_count, vllm, stepscope_version, args, committed_at
FROM runs;

-- Last successful run per host x collector verb: what "fresh" means on the Overview.
CREATE VIEW v_freshness AS
SELECT host, verb,
       max(finished_at) FILTER (WHERE status IN ('ok', 'partial')) AS last_ok_at,
       max(finished_at) AS last_any_at,
       count(*) AS runs,
       count(*) FILTER (WHERE status = 'failed') AS failed_runs
FROM runs
GROUP BY host, verb;

-- One row per host: what it is (from its newest run) and when it last reported.
CREATE VIEW v_hosts AS
SELECT host,
       arg_max(gpu_model, finished_at) AS gpu_model,
       arg_max(gpu_count, finished_at) AS gpu_count,
       arg_max(os, finished_at) AS os,
       arg_max(cpu, finished_at) AS cpu,
       arg_max(cuda_driver, finished_at) AS cuda_driver,
       max(finished_at) AS last_seen_at,
       count(*) AS runs
FROM runs
GROUP BY host;

-- GPUs seen by the `host` snapshot (the full NVML inventory lives in the gpu tables).
CREATE TABLE host_gpus (
    run_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,
    name VARCHAR,
    uuid VARCHAR,
    memory_bytes BIGINT,
    pci_bus_id VARCHAR
);
