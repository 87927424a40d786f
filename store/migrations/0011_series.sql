-- 0011: series - one measured figure at one fixed point on one host, run after run
-- (issue 23). Defined once here; `collectors check`, the Trends page and any export read
-- these views. Views only: nothing is stored, so every run already in a store is in them.
--
-- One point per run and series: the run's median when a run holds several rows of the
-- same point. Failed runs are left out. `series_id` is the first 12 hex digits of the md5
-- of the series' key (family, host, metric and the fixed point), stable across stores.

-- The host's environment snapshots (`host` and `gpu` runs): what a point falls back to for
-- a version its own run does not record (trace imports record none of the importer's).
CREATE VIEW v_host_versions AS
SELECT r.host, r.run_id, r.verb, r.finished_at AS measured_at, r.torch, r.nccl, r.vllm,
       coalesce(g.driver_version, json_extract_string(r.env, '$.driver_version')) AS driver
FROM runs r LEFT JOIN gpu_host g USING (run_id)
WHERE r.verb IN ('host', 'gpu') AND r.status <> 'failed' AND r.finished_at IS NOT NULL;

-- Serving benchmarks: TPOT/ITL/TTFT (medians over requests, as vllm bench prints them)
-- and output throughput at engine, model, layout, concurrency, rate, input/output length.
CREATE VIEW v_series_serving AS
WITH b AS (
    SELECT v.run_id, v.host, v.finished_at AS measured_at, coalesce(v.engine, 'vllm') AS engine,
           v.engine_version, coalesce(v.model_id, 'model unknown') AS model,
           coalesce(v.layout, 'layout unknown') AS layout, v.concurrency,
           CAST(round(v.input_len) AS INTEGER) AS input_len,
           CAST(round(v.output_len) AS INTEGER) AS output_len, v.request_rate,
           v.median_tpot_ms, v.median_itl_ms, v.median_ttft_ms, v.output_throughput
    FROM v_serving_bench v WHERE v.status <> 'failed'
), m(metric, metric_label, unit, better) AS (
    VALUES ('median_tpot_ms', 'median TPOT', 'ms', 'lower'),
           ('median_itl_ms', 'median ITL', 'ms', 'lower'),
           ('median_ttft_ms', 'median TTFT', 'ms', 'lower'),
           ('output_throughput', 'output throughput', 'tok/s', 'higher')
), p AS (
    SELECT b.*, m.*,
           CASE m.metric WHEN 'median_tpot_ms' THEN b.median_tpot_ms
                         WHEN 'median_itl_ms' THEN b.median_itl_ms
                         WHEN 'median_ttft_ms' THEN b.median_ttft_ms
                         ELSE b.output_throughput END AS value
    FROM b CROSS JOIN m
)
SELECT left(md5(concat_ws('|', 'serving', host, metric, engine, model, layout,
                          coalesce(CAST(concurrency AS VARCHAR), '-'),
                          coalesce(CAST(input_len AS VARCHAR), '-'),
                          coalesce(CAST(output_len AS VARCHAR), '-'),
                          coalesce(CAST(request_rate AS VARCHAR), 'inf'))), 12) AS series_id,
       'serving' AS family, host, metric, any_value(metric_label) AS metric_label,
       any_value(unit) AS unit, any_value(better) AS better,
       concat_ws(' ', engine, model, layout, 'c=' || coalesce(CAST(concurrency AS VARCHAR), '?'),
                 'in=' || coalesce(CAST(input_len AS VARCHAR), '?'),
                 'out=' || coalesce(CAST(output_len AS VARCHAR), '?'),
                 'rate=' || CAST(request_rate AS VARCHAR)) AS point,
       run_id, any_value(measured_at) AS measured_at, median(value) AS value,
       engine, any_value(engine_version) AS engine_version, model, layout, concurrency,
       input_len, output_len, request_rate
FROM p WHERE value IS NOT NULL
GROUP BY host, metric, engine, model, layout, concurrency, input_len, output_len,
         request_rate, run_id;

-- Collectives: latency (p50; nccl-tests' one time) and bus bandwidth at op, dtype, size
-- (and tokens per GPU for `comm --tokens`), ranks, backend and graph/eager. nccl-tests'
-- out-of-place half, else in-place (as the Collectives page draws them).
CREATE VIEW v_series_comm AS
WITH c AS (
    SELECT v.run_id, v.host, v.finished_at AS measured_at, v.op, v.dtype, v.bytes, v.tokens_per_rank,
           v.hidden, v.world_size AS ranks, v.backend, coalesce(v.graph_mode, false) AS graph_mode,
           v.p50_us, v.busbw_gbps
    FROM v_comm_results v JOIN runs r USING (run_id)
    WHERE r.status <> 'failed'
      AND (NOT v.in_place OR NOT EXISTS (
          SELECT 1 FROM comm_results o WHERE o.run_id = v.run_id AND o.op = v.op
            AND o.bytes = v.bytes AND o.dtype IS NOT DISTINCT FROM v.dtype AND NOT o.in_place))
), m(metric, metric_label, unit, better) AS (
    VALUES ('p50_us', 'latency', 'us', 'lower'), ('busbw_gbps', 'bus bandwidth', 'GB/s', 'higher')
), p AS (
    SELECT c.*, m.*, CASE m.metric WHEN 'p50_us' THEN c.p50_us ELSE c.busbw_gbps END AS value
    FROM c CROSS JOIN m
)
SELECT left(md5(concat_ws('|', 'comm', host, metric, op, coalesce(dtype, '-'),
                          coalesce(CAST(bytes AS VARCHAR), '-'),
                          coalesce(CAST(tokens_per_rank AS VARCHAR), '-'),
                          coalesce(CAST(hidden AS VARCHAR), '-'),
                          coalesce(CAST(ranks AS VARCHAR), '-'), coalesce(backend, '-'),
                          CAST(graph_mode AS VARCHAR))), 12) AS series_id,
       'comm' AS family, host, metric, any_value(metric_label) AS metric_label,
       any_value(unit) AS unit, any_value(better) AS better,
       concat_ws(' ', op, dtype,
                 CASE WHEN tokens_per_rank IS NOT NULL
                      THEN tokens_per_rank || ' tok/GPU (hidden ' || hidden || ')'
                      ELSE format_bytes(bytes) END,
                 coalesce(CAST(ranks AS VARCHAR), '?') || ' ranks', backend,
                 CASE WHEN graph_mode THEN 'graph' ELSE 'eager' END) AS point,
       run_id, any_value(measured_at) AS measured_at, median(value) AS value,
       op, dtype, bytes, tokens_per_rank, hidden, ranks, backend, graph_mode
FROM p WHERE value IS NOT NULL
GROUP BY host, metric, op, dtype, bytes, tokens_per_rank, hidden, ranks, backend, graph_mode,
         run_id;

-- Trace steps: step time (median window over ranks x steps) and each category's time per
-- step (summed over the steps of that kind / their rank x step count, as
-- v_trace_categories counts it) at model, layout and step kind. Kind from vLLM's step
-- annotation: decode, prefill or mixed; `step` where the trace cannot say (ProfilerStep,
-- SGLang, gaps). Model: the profiled server's, `profile`'s preset, else the run's label.
CREATE VIEW v_series_trace AS
WITH s AS (
    SELECT st.run_id, st.rank, st.step, st.wall_us,
           CASE WHEN coalesce(st.context_tokens, st.context_requests, 0) > 0
                 AND coalesce(st.generation_tokens, st.generation_requests, 0) > 0 THEN 'mixed'
                WHEN coalesce(st.context_tokens, st.context_requests, 0) > 0 THEN 'prefill'
                WHEN coalesce(st.generation_tokens, st.generation_requests, 0) > 0 THEN 'decode'
                ELSE 'step' END AS step_kind
    FROM v_trace_steps st
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

-- Every point of every series, with the versions in force when it was measured: the run's
-- own where it recorded them, else the host's newest snapshot at or before the point.
CREATE VIEW v_series_points AS
WITH p AS (
    SELECT * FROM v_series_serving
    UNION ALL BY NAME SELECT * FROM v_series_comm
    UNION ALL BY NAME SELECT * FROM v_series_trace
)
SELECT p.series_id, p.family, p.host, p.metric, p.metric_label, p.unit, p.better, p.point,
       p.family || ' ' || p.point || ': ' || p.metric_label AS series,
       p.run_id, p.measured_at, p.value, p.engine,
       coalesce(p.engine_version, CASE WHEN p.engine = 'vllm' THEN coalesce(r.vllm, h.vllm) END)
           AS engine_version,
       coalesce(r.torch, h.torch) AS torch,
       coalesce(r.nccl, h.nccl) AS nccl,
       coalesce(json_extract_string(r.env, '$.driver_version'), h.driver) AS driver,
       h.run_id AS snapshot_run_id,
       p.model, p.layout, p.concurrency, p.input_len, p.output_len, p.request_rate,
       p.op, p.dtype, p.bytes, p.tokens_per_rank, p.hidden, p.ranks, p.backend, p.graph_mode,
       p.step_kind, p.category
FROM p
JOIN runs r USING (run_id)
ASOF LEFT JOIN v_host_versions h ON h.host = p.host AND p.measured_at >= h.measured_at;

-- One row per series: what it measures, how many runs, first and newest.
CREATE VIEW v_series AS
SELECT series_id, any_value(family) AS family, any_value(host) AS host,
       any_value(series) AS series, any_value(point) AS point, any_value(metric) AS metric,
       any_value(metric_label) AS metric_label, any_value(unit) AS unit,
       any_value(better) AS better, count(*) AS runs, min(measured_at) AS first_at, max(measured_at) AS last_at,
       arg_max(value, measured_at) AS last_value
FROM v_series_points
GROUP BY series_id;
