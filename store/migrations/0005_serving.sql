-- 0005: vLLM serving - benchmark results, the vllm-profile load, server facts, metric scrapes.
-- Layout columns (tp, pp, dp, ep, layout, layout_kind) use the planner's kinds:
-- tp | tp_ep_dp1 | dp_attn_ep | tp_dp.

-- One row per `vllm bench serve` result (one concurrency of a sweep, or one imported file).
CREATE TABLE serving_bench (
    run_id VARCHAR NOT NULL,
    source VARCHAR,                   -- result file name (import) or 'sweep'
    result_date VARCHAR,              -- the JSON's "date" (YYYYmmdd-HHMMSS, server-local time)
    bench_label VARCHAR,              -- the JSON's "label"
    backend VARCHAR,
    model_id VARCHAR,
    tokenizer_id VARCHAR,
    num_prompts INTEGER,
    request_rate DOUBLE,              -- requests/s; NULL = inf (all sent at once)
    burstiness DOUBLE,
    max_concurrency INTEGER,          -- --max-concurrency (NULL = unlimited)
    concurrency INTEGER,              -- effective: max_concurrency, else num_prompts at inf rate
    input_len DOUBLE,                 -- mean prompt tokens per request
    output_len DOUBLE,                -- mean output tokens per request
    completed INTEGER,
    failed INTEGER,
    duration_s DOUBLE,
    total_input_tokens BIGINT,
    total_output_tokens BIGINT,
    request_throughput DOUBLE,        -- requests/s
    output_throughput DOUBLE,         -- output tokens/s
    total_token_throughput DOUBLE,    -- (input + output) tokens/s
    max_output_tokens_per_s DOUBLE,
    max_concurrent_requests DOUBLE,
    mean_ttft_ms DOUBLE, median_ttft_ms DOUBLE, std_ttft_ms DOUBLE, p90_ttft_ms DOUBLE, p99_ttft_ms DOUBLE,
    mean_tpot_ms DOUBLE, median_tpot_ms DOUBLE, std_tpot_ms DOUBLE, p90_tpot_ms DOUBLE, p99_tpot_ms DOUBLE,
    mean_itl_ms DOUBLE, median_itl_ms DOUBLE, std_itl_ms DOUBLE, p90_itl_ms DOUBLE, p99_itl_ms DOUBLE,
    mean_e2el_ms DOUBLE, median_e2el_ms DOUBLE, std_e2el_ms DOUBLE, p90_e2el_ms DOUBLE, p99_e2el_ms DOUBLE,
    tp INTEGER, pp INTEGER, dp INTEGER, ep BOOLEAN,
    layout VARCHAR,                   -- e.g. TP8, TP8+EP, TP1xDP8+EP (NULL when unknown)
    layout_kind VARCHAR,
    layout_source VARCHAR,            -- server-args | server_info | metadata | flags | unknown
    vllm_version VARCHAR,             -- of the server, when known
    extra VARCHAR                     -- JSON: the result's other scalar keys (other percentiles, metadata)
);

-- The vLLM server a vllm-profile run measured (one row per run).
CREATE TABLE vllm_server (
    run_id VARCHAR NOT NULL,
    url VARCHAR,
    model_id VARCHAR,
    model_root VARCHAR,
    max_model_len INTEGER,
    vllm_version VARCHAR,
    tp INTEGER, pp INTEGER, dp INTEGER, ep BOOLEAN,
    layout VARCHAR, layout_kind VARCHAR, layout_source VARCHAR,
    all2all_backend VARCHAR, kv_cache_dtype VARCHAR, quantization VARCHAR,
    server_args VARCHAR,
    trace_dir VARCHAR,
    trace_files INTEGER,
    flush_wait_s DOUBLE,              -- from /stop_profile until every rank's file was final
    num_requests INTEGER, concurrency INTEGER, input_len INTEGER, output_len INTEGER
);

-- Per-request client measurements of the load vllm-profile drove while profiling.
CREATE TABLE vllm_load (
    run_id VARCHAR NOT NULL,
    request_index INTEGER NOT NULL,
    start_s DOUBLE,                   -- seconds since the load started
    ttft_ms DOUBLE, tpot_ms DOUBLE, e2el_ms DOUBLE,
    itl_mean_ms DOUBLE, itl_max_ms DOUBLE,
    chunks INTEGER,
    prompt_tokens INTEGER, output_tokens INTEGER,
    error VARCHAR
);

-- One row per sample of one /metrics scrape (vllm:* families only; `_created` dropped).
CREATE TABLE vllm_metrics_samples (
    run_id VARCHAR NOT NULL,
    scraped_at TIMESTAMP WITH TIME ZONE NOT NULL,
    url VARCHAR,
    metric VARCHAR NOT NULL,          -- family, e.g. vllm:inter_token_latency_seconds
    kind VARCHAR NOT NULL,            -- gauge | counter | histogram | summary | untyped
    sample VARCHAR NOT NULL,          -- sample name: family + '' | '_total' | '_bucket' | '_sum' | '_count'
    model_name VARCHAR,
    engine VARCHAR,
    labels VARCHAR,                   -- JSON of the other labels (e.g. finished_reason)
    le DOUBLE,                        -- bucket upper bound (buckets only; +Inf = 'inf')
    value DOUBLE NOT NULL
);

CREATE VIEW v_serving_bench AS
SELECT b.*, r.host, r.label, r.finished_at, r.gpu_model, r.gpu_count, r.status
FROM serving_bench b JOIN runs r USING (run_id);

CREATE VIEW v_vllm_servers AS
SELECT s.*, r.host, r.label, r.finished_at, r.gpu_model, r.gpu_count, r.status, r.message
FROM vllm_server s JOIN runs r USING (run_id);

CREATE VIEW v_vllm_load AS
SELECT l.*, r.host, r.finished_at
FROM vllm_load l JOIN runs r USING (run_id);

CREATE VIEW v_vllm_load_summary AS
SELECT run_id, host, finished_at,
       count(*) AS requests,
       count(*) FILTER (WHERE error IS NULL) AS completed,
       avg(ttft_ms) AS mean_ttft_ms, median(ttft_ms) AS median_ttft_ms,
       quantile_cont(ttft_ms, 0.99) AS p99_ttft_ms,
       avg(tpot_ms) AS mean_tpot_ms, median(tpot_ms) AS median_tpot_ms,
       quantile_cont(tpot_ms, 0.99) AS p99_tpot_ms,
       avg(itl_mean_ms) AS mean_itl_ms, max(itl_max_ms) AS max_itl_ms,
       avg(e2el_ms) AS mean_e2el_ms,
       sum(output_tokens) AS output_tokens
FROM v_vllm_load
GROUP BY run_id, host, finished_at;

CREATE VIEW v_vllm_metrics AS
SELECT m.*, r.host
FROM vllm_metrics_samples m JOIN runs r USING (run_id);

-- One row per scrape and served model: gauges summed (KV-cache usage averaged) over engines,
-- cumulative counters and histogram sums/counts for deltas between scrapes.
CREATE VIEW v_vllm_scrapes AS
SELECT run_id, host, url, model_name, scraped_at,
    sum(value) FILTER (WHERE sample = 'vllm:num_requests_running') AS running,
    sum(value) FILTER (WHERE sample = 'vllm:num_requests_waiting') AS waiting,
    coalesce(avg(value) FILTER (WHERE sample = 'vllm:kv_cache_usage_perc'),
             avg(value) FILTER (WHERE sample = 'vllm:gpu_cache_usage_perc')) AS kv_cache_usage,
    sum(value) FILTER (WHERE sample = 'vllm:prompt_tokens_total') AS prompt_tokens,
    sum(value) FILTER (WHERE sample = 'vllm:generation_tokens_total') AS generation_tokens,
    sum(value) FILTER (WHERE sample = 'vllm:request_success_total') AS requests_finished,
    sum(value) FILTER (WHERE sample = 'vllm:num_preemptions_total') AS preemptions,
    coalesce(sum(value) FILTER (WHERE sample = 'vllm:inter_token_latency_seconds_sum'),
             sum(value) FILTER (WHERE sample = 'vllm:time_per_output_token_seconds_sum')) AS itl_sum_s,
    coalesce(sum(value) FILTER (WHERE sample = 'vllm:inter_token_latency_seconds_count'),
             sum(value) FILTER (WHERE sample = 'vllm:time_per_output_token_seconds_count')) AS itl_count,
    sum(value) FILTER (WHERE sample = 'vllm:request_time_per_output_token_seconds_sum') AS tpot_sum_s,
    sum(value) FILTER (WHERE sample = 'vllm:request_time_per_output_token_seconds_count') AS tpot_count,
    sum(value) FILTER (WHERE sample = 'vllm:time_to_first_token_seconds_sum') AS ttft_sum_s,
    sum(value) FILTER (WHERE sample = 'vllm:time_to_first_token_seconds_count') AS ttft_count,
    sum(value) FILTER (WHERE sample = 'vllm:e2e_request_latency_seconds_sum') AS e2e_sum_s,
    sum(value) FILTER (WHERE sample = 'vllm:e2e_request_latency_seconds_count') AS e2e_count
FROM v_vllm_metrics
GROUP BY run_id, host, url, model_name, scraped_at;

-- Between consecutive scrapes of one server: rates and mean latencies of that interval.
-- A counter that went down (server restart) gives NULL for that interval, not a negative.
CREATE VIEW v_vllm_metrics_deltas AS
WITH d AS (
    SELECT *,
        date_diff('millisecond', lag(scraped_at) OVER w, scraped_at) / 1000.0 AS interval_s,
        generation_tokens - lag(generation_tokens) OVER w AS d_gen,
        prompt_tokens - lag(prompt_tokens) OVER w AS d_prompt,
        requests_finished - lag(requests_finished) OVER w AS d_req,
        itl_sum_s - lag(itl_sum_s) OVER w AS d_itl_sum, itl_count - lag(itl_count) OVER w AS d_itl_n,
        tpot_sum_s - lag(tpot_sum_s) OVER w AS d_tpot_sum, tpot_count - lag(tpot_count) OVER w AS d_tpot_n,
        ttft_sum_s - lag(ttft_sum_s) OVER w AS d_ttft_sum, ttft_count - lag(ttft_count) OVER w AS d_ttft_n,
        e2e_sum_s - lag(e2e_sum_s) OVER w AS d_e2e_sum, e2e_count - lag(e2e_count) OVER w AS d_e2e_n,
        lag(run_id) OVER w AS prev_run_id
    FROM v_vllm_scrapes
    WINDOW w AS (PARTITION BY host, url, model_name ORDER BY scraped_at)
)
SELECT run_id, prev_run_id, host, url, model_name, scraped_at, interval_s,
    running, waiting, kv_cache_usage,
    CASE WHEN d_gen >= 0 AND interval_s > 0 THEN d_gen / interval_s END AS generation_tokens_per_s,
    CASE WHEN d_prompt >= 0 AND interval_s > 0 THEN d_prompt / interval_s END AS prompt_tokens_per_s,
    CASE WHEN d_req >= 0 AND interval_s > 0 THEN d_req / interval_s END AS requests_per_s,
    CASE WHEN d_itl_n > 0 AND d_itl_sum >= 0 THEN 1000.0 * d_itl_sum / d_itl_n END AS mean_itl_ms,
    CASE WHEN d_tpot_n > 0 AND d_tpot_sum >= 0 THEN 1000.0 * d_tpot_sum / d_tpot_n END AS mean_tpot_ms,
    CASE WHEN d_ttft_n > 0 AND d_ttft_sum >= 0 THEN 1000.0 * d_ttft_sum / d_ttft_n END AS mean_ttft_ms,
    CASE WHEN d_e2e_n > 0 AND d_e2e_sum >= 0 THEN 1000.0 * d_e2e_sum / d_e2e_n END AS mean_e2e_ms
FROM d;

-- Histogram bucket counts added between consecutive scrapes (summed over engines), for
-- interval quantiles (store/queries_serving.py interpolates them like histogram_quantile).
CREATE VIEW v_vllm_histogram_deltas AS
WITH b AS (
    SELECT run_id, host, url, model_name, scraped_at, metric, le, sum(value) AS cumulative
    FROM v_vllm_metrics
    WHERE sample = metric || '_bucket'
    GROUP BY run_id, host, url, model_name, scraped_at, metric, le
), d AS (
    SELECT *, cumulative - lag(cumulative) OVER
              (PARTITION BY host, url, model_name, metric, le ORDER BY scraped_at) AS added
    FROM b
)
SELECT run_id, host, url, model_name, scraped_at, metric, le, cumulative,
       CASE WHEN added >= 0 THEN added END AS added
FROM d;
