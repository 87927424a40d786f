-- 0002: PyTorch-profiler (Kineto) trace imports: per rank, per step, per category, per kernel.
-- Written by `python -m collectors trace` and `profile`. Times are microseconds; start_us
-- is relative to the rank's first analysed event (trace_ranks.trace_start_ns gives that
-- instant in Unix nanoseconds).
CREATE TABLE trace_ranks (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    file VARCHAR,                     -- trace file the rank came from
    size_bytes BIGINT,                -- file size on disk (compressed when .gz)
    partial BOOLEAN,                  -- file ended early (crashed run's .tmp): complete events kept
    rank_source VARCHAR,              -- distributedInfo | filename | order
    world_size INTEGER,
    backend VARCHAR,                  -- from distributedInfo
    nccl_version VARCHAR,
    device_name VARCHAR,              -- deviceProperties (first device with a name)
    events_total BIGINT,              -- events in the file
    events_kept BIGINT,               -- events parsed (kernels, runtime, cpu ops, annotations)
    kernels BIGINT,                   -- GPU events: kernels + memcpy + memset (0 for CPU traces)
    has_gpu BOOLEAN,
    busy_us DOUBLE,                   -- union of kernel/memcpy/memset time inside the windows
    idle_us DOUBLE,                   -- span_us - busy_us
    span_us DOUBLE,                   -- length of the analysed windows (union of step windows)
    comm_us DOUBLE,                   -- union of communication kernels inside the windows
    exposed_comm_us DOUBLE,           -- communication with no compute kernel running
    steps INTEGER,
    trace_start_ns BIGINT,            -- first analysed event, Unix ns (baseTimeNanoseconds applied)
    step_source VARCHAR               -- vllm | profiler_step | sglang | gap
);

CREATE TABLE trace_steps (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,            -- 0-based, in time order per rank
    name VARCHAR,                     -- annotation name, or gap#k
    source VARCHAR,                   -- vllm | profiler_step | sglang | gap
    start_us DOUBLE,                  -- window start, relative to the rank's trace start
    wall_us DOUBLE,                   -- window length (GPU side; CPU ops for CPU traces)
    busy_us DOUBLE,                   -- busy time inside the window
    context_tokens INTEGER,           -- vLLM: prefill tokens in the step
    generation_tokens INTEGER,        -- vLLM: decode tokens in the step
    context_requests INTEGER,         -- vLLM: requests in prefill (old form: new requests)
    generation_requests INTEGER       -- vLLM: requests decoding (old form: cached requests)
);

CREATE TABLE trace_step_categories (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    category VARCHAR NOT NULL,
    calls BIGINT,
    total_us DOUBLE                   -- sum of durations (overlapping streams both count)
);

CREATE TABLE trace_kernel_stats (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    name VARCHAR NOT NULL,
    category VARCHAR NOT NULL,
    dtype VARCHAR,                    -- collectives only: bf16, f16, f32, f8e4m3, f8e5m2, i8, ...
    calls BIGINT,
    total_us DOUBLE,
    min_us DOUBLE,
    max_us DOUBLE,
    steps_seen INTEGER
);

-- Every GPU event (or top-level CPU op of a CPU-only trace): drill-down only, can be large.
CREATE TABLE trace_kernels (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER,                     -- NULL outside any step
    stream BIGINT,                    -- CUDA/HIP stream (CPU thread for cpu_op rows)
    start_us DOUBLE,                  -- relative to the rank's trace start
    dur_us DOUBLE,
    name VARCHAR,
    category VARCHAR,
    dtype VARCHAR,
    kind VARCHAR                      -- kernel | memcpy | memset | cpu_op
);

CREATE VIEW v_trace_ranks AS
SELECT r.run_id, r.rank, r.file, r.size_bytes, r.partial, r.rank_source, r.world_size,
       r.backend, r.nccl_version, r.device_name, r.events_total, r.events_kept, r.kernels,
       r.has_gpu, r.busy_us, r.idle_us, r.span_us, r.comm_us, r.exposed_comm_us,
       r.busy_us / nullif(r.span_us, 0) AS busy_frac,
       r.exposed_comm_us / nullif(r.span_us, 0) AS exposed_comm_frac,
       r.steps, r.step_source, r.trace_start_ns, u.host, u.label, u.status, u.finished_at
FROM trace_ranks r JOIN runs u USING (run_id);

CREATE VIEW v_trace_steps AS
SELECT s.run_id, s.rank, s.step, s.name, s.source, s.start_us, s.wall_us, s.busy_us,
       s.wall_us - s.busy_us AS idle_us, s.context_tokens, s.generation_tokens,
       s.context_requests, s.generation_requests,
       (SELECT sum(c.total_us) FROM trace_step_categories c
        WHERE c.run_id = s.run_id AND c.rank = s.rank AND c.step = s.step
          AND c.category IN ('allreduce', 'all_to_all', 'allgather', 'reduce_scatter',
                             'other_comm')) AS comm_us
FROM trace_steps s;

-- Per run x category, over all ranks and steps. pct_of_step = category time / summed step
-- wall time (both summed over every rank and step), in percent: "AllReduce is 51.5% of
-- the step". Kernels on concurrent streams both count, so categories can add past 100.
CREATE VIEW v_trace_categories AS
WITH w AS (
    SELECT run_id, count(*) AS rank_steps, count(DISTINCT step) AS steps, sum(wall_us) AS wall_us
    FROM trace_steps GROUP BY run_id
)
SELECT c.run_id, c.category,
       sum(c.calls) AS calls,
       sum(c.total_us) AS total_us,
       any_value(w.steps) AS steps,
       any_value(w.rank_steps) AS rank_steps,
       sum(c.calls) / any_value(w.rank_steps) AS calls_per_step,
       sum(c.total_us) / nullif(sum(c.calls), 0) AS avg_us,
       sum(c.total_us) / any_value(w.rank_steps) AS us_per_step,
       100.0 * sum(c.total_us) / nullif(any_value(w.wall_us), 0) AS pct_of_step
FROM trace_step_categories c JOIN w USING (run_id)
GROUP BY c.run_id, c.category;

CREATE VIEW v_trace_kernel_stats AS
SELECT run_id, rank, name, category, dtype, calls, total_us, min_us, max_us, steps_seen,
       total_us / nullif(calls, 0) AS avg_us
FROM trace_kernel_stats;
