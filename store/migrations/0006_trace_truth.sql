-- 0006: trace truth (issue 12). Every GPU event is counted once: in its step
-- (trace_step_categories) or outside every step (trace_outside_categories). Collectives carry
-- the module that issued them (trace_comm_sources). CUDA-graph facts per rank.
ALTER TABLE trace_ranks ADD COLUMN graph_launches BIGINT;        -- cudaGraphLaunch/hipGraphLaunch calls
ALTER TABLE trace_ranks ADD COLUMN graph_kernels BIGINT;         -- GPU events launched by them
ALTER TABLE trace_ranks ADD COLUMN graph_moe_relabelled BIGINT;  -- graph GEMMs between MoE kernels counted as moe
ALTER TABLE trace_ranks ADD COLUMN outside_calls BIGINT;         -- GPU events launched outside every step
ALTER TABLE trace_ranks ADD COLUMN outside_us DOUBLE;            -- their summed duration

-- GPU events (top-level CPU ops of a CPU-only trace) launched outside every step.
CREATE TABLE trace_outside_categories (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    category VARCHAR NOT NULL,
    calls BIGINT,
    total_us DOUBLE
);

-- Step anatomy: collectives by the module that issued them, totalled over the rank.
CREATE TABLE trace_comm_sources (
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    category VARCHAR NOT NULL,        -- allreduce | all_to_all | allgather | reduce_scatter | other_comm
    source VARCHAR NOT NULL,          -- attention | moe | mlp | embedding | logits | other
    in_steps BOOLEAN NOT NULL,        -- launched inside a step (false: outside every step)
    calls BIGINT,
    total_us DOUBLE
);

-- Per run x category x source, inside steps, per step as v_trace_categories computes it.
CREATE VIEW v_trace_comm_sources AS
WITH w AS (
    SELECT run_id, count(*) AS rank_steps, sum(wall_us) AS wall_us
    FROM trace_steps GROUP BY run_id
)
SELECT c.run_id, c.category, c.source,
       sum(c.calls) AS calls,
       sum(c.total_us) AS total_us,
       sum(c.calls) / any_value(w.rank_steps) AS calls_per_step,
       sum(c.total_us) / any_value(w.rank_steps) AS us_per_step,
       100.0 * sum(c.total_us) / nullif(any_value(w.wall_us), 0) AS pct_of_step
FROM trace_comm_sources c JOIN w USING (run_id)
WHERE c.in_steps
GROUP BY c.run_id, c.category, c.source;

-- Per run x category: GPU events outside every step.
CREATE VIEW v_trace_outside_steps AS
SELECT run_id, category, sum(calls) AS calls, sum(total_us) AS total_us
FROM trace_outside_categories GROUP BY run_id, category;
