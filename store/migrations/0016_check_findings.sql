-- 0016 (issue 58): what `collectors check` found, kept with its run (verb `check`), so the
-- Overview and the Trends page show the newest check's answer without analysing every
-- series again: a fleet of 10,000 runs has ~50,000 series, minutes of work for a nightly
-- job and far too much for a page. The run's `args` record what was checked (`series`,
-- `points`, `host`, `min_change_pct`, `min_runs`).

-- One row per finding: a series whose newest level moved from the one before it.
CREATE TABLE check_findings (
    run_id VARCHAR NOT NULL,          -- the check run
    kind VARCHAR NOT NULL,            -- regression | improvement
    series_id VARCHAR NOT NULL,       -- as v_series_points.series_id
    family VARCHAR,
    host VARCHAR,                     -- the host the series was measured on
    series VARCHAR,
    metric_label VARCHAR,
    unit VARCHAR,
    better VARCHAR,                   -- lower | higher
    before DOUBLE,                    -- median of the level before
    after DOUBLE,                     -- median of the newest level
    change DOUBLE,                    -- relative, signed: 0.12 is 12% higher
    since_run_id VARCHAR,             -- the first run at the newest level
    since_at TIMESTAMPTZ,
    runs_since INTEGER,               -- runs at the newest level, the newest included
    newest_run_id VARCHAR,
    versions_changed VARCHAR,         -- "vLLM 0.11.0 -> 0.11.1, NCCL ..." near the move, or NULL
    shifts VARCHAR,                   -- JSON [[first point index, before, after], ...]: every
                                      -- level change of the series, oldest first (the chart's levels)
    line VARCHAR                      -- the line `check` printed
);

-- Every point of every series a check reported (v_series_points' columns), so a page draws
-- their history, levels and change points without the series views.
CREATE TABLE check_points (
    run_id VARCHAR NOT NULL,          -- the check run
    series_id VARCHAR NOT NULL,
    family VARCHAR,
    host VARCHAR,
    series VARCHAR,
    point VARCHAR,
    metric VARCHAR,
    metric_label VARCHAR,
    unit VARCHAR,
    better VARCHAR,
    point_run_id VARCHAR NOT NULL,    -- the measured run (v_series_points.run_id)
    measured_at TIMESTAMPTZ,
    value DOUBLE,
    engine VARCHAR,
    engine_version VARCHAR,
    torch VARCHAR,
    nccl VARCHAR,
    driver VARCHAR
);

-- The same trace series, read from trace_steps itself: v_trace_steps adds a correlated sum
-- (comm_us) that this view never reads and DuckDB 1.5.5 still computes (5 of 15 s at
-- 10,000 runs, benchmarks/scale/fleet.py). Columns and rows unchanged.
CREATE OR REPLACE VIEW v_series_trace AS
WITH s AS (
    SELECT st.run_id, st.rank, st.step, st.wall_us,
           CASE WHEN coalesce(st.context_tokens, st.context_requests, 0) > 0
                 AND coalesce(st.generation_tokens, st.generation_requests, 0) > 0 THEN 'mixed'
                WHEN coalesce(st.context_tokens, st.context_requests, 0) > 0 THEN 'prefill'
                WHEN coalesce(st.generation_tokens, st.generation_requests, 0) > 0 THEN 'decode'
                ELSE 'step' END AS step_kind
    FROM trace_steps st
), k AS (
    SELECT run_id, step_kind, count(*) AS rank_steps, median(wall_us) AS step_us
    FROM s GROUP BY run_id, step_kind
), cat AS (
    SELECT s.run_id, s.step_kind, c.category, sum(c.total_us) AS total_us
    FROM s JOIN trace_step_categories c USING (run_id, rank, step)
    GROUP BY s.run_id, s.step_kind, c.category
), runs_of AS (
    SELECT r.run_id, r.host, r.finished_at AS measured_at,
           coalesce(vs.model_id, gs.model_id,
                    CASE WHEN r.verb = 'profile' THEN 'preset ' || json_extract_string(r.args, '$.preset') END,
                    r.label, 'unlabelled trace') AS model,
           coalesce(vs.layout, gs.layout,
                    CASE WHEN r.verb = 'profile' THEN 'TP' || json_extract_string(r.args, '$.tp') END,
                    (SELECT max(t.world_size) || CASE max(t.world_size) WHEN 1 THEN ' rank' ELSE ' ranks' END
                     FROM trace_ranks t WHERE t.run_id = r.run_id),
                    'layout unknown') AS layout,
           CASE WHEN vs.run_id IS NOT NULL THEN 'vllm' WHEN gs.run_id IS NOT NULL THEN 'sglang' END AS engine,
           coalesce(vs.vllm_version, gs.sglang_version) AS engine_version
    FROM runs r
    LEFT JOIN vllm_server vs USING (run_id)
    LEFT JOIN sglang_server gs USING (run_id)
    WHERE r.status <> 'failed' AND r.run_id IN (SELECT run_id FROM k)
), p AS (
    SELECT k.run_id, k.step_kind, 'step_us' AS metric, 'step time (median)' AS metric_label,
           k.step_us AS value
    FROM k
    UNION ALL
    SELECT cat.run_id, cat.step_kind, cat.category || '_us', cat.category || ' per step',
           cat.total_us / k.rank_steps
    FROM cat JOIN k USING (run_id, step_kind)
)
SELECT left(md5(concat_ws('|', 'trace', o.host, p.metric, o.model, o.layout, p.step_kind)), 12)
           AS series_id,
       'trace' AS family, o.host, p.metric, p.metric_label, 'us' AS unit, 'lower' AS better,
       concat_ws(' ', o.model, o.layout, p.step_kind) AS point,
       p.run_id, o.measured_at, p.value, o.engine, o.engine_version, o.model, o.layout, p.step_kind,
       CASE WHEN p.metric = 'step_us' THEN NULL ELSE left(p.metric, -3) END AS category
FROM p JOIN runs_of o USING (run_id)
WHERE p.value IS NOT NULL;
