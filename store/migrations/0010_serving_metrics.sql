-- 0010: one table for the metric scrapes of every serving engine.
-- Before this, sglang-metrics samples landed in vllm_metrics_samples (their names carry the
-- engine's prefix). Now every scrape is a serving_metrics_samples row with its `engine`;
-- vLLM's own `engine` label (the engine core index under data parallelism) is
-- `engine_index`. The scrape, interval and histogram views are defined once over all
-- engines (v_serving_*); v_vllm_* and v_sglang_* are thin filters with their old columns.
-- Older bundles naming vllm_metrics_samples still commit: store/renamed_tables.py.

CREATE TABLE serving_metrics_samples (
    run_id VARCHAR NOT NULL,
    engine VARCHAR NOT NULL,          -- vllm | sglang: the server scraped (its families' prefix)
    scraped_at TIMESTAMP WITH TIME ZONE NOT NULL,
    url VARCHAR,
    metric VARCHAR NOT NULL,          -- family, e.g. vllm:inter_token_latency_seconds
    kind VARCHAR NOT NULL,            -- gauge | counter | histogram | summary | untyped
    sample VARCHAR NOT NULL,          -- family + '' | '_total' | '_bucket' | '_sum' | '_count'
    model_name VARCHAR,               -- the model_name label (NULL: a server-wide family)
    engine_index VARCHAR,             -- vLLM's `engine` label (DP engine core), NULL elsewhere
    labels VARCHAR,                   -- JSON of the other labels (finished_reason, tp_rank, ...)
    le DOUBLE,                        -- bucket upper bound (buckets only; +Inf = 'inf')
    value DOUBLE NOT NULL
);

-- Every row of the old table, its engine read from the metric's prefix (vllm: / sglang:).
INSERT INTO serving_metrics_samples BY NAME
SELECT run_id, split_part(metric, ':', 1) AS engine, scraped_at, url, metric, kind, sample,
       model_name, engine AS engine_index, labels, le, value
FROM vllm_metrics_samples;

DROP VIEW v_sglang_metrics_deltas;
DROP VIEW v_sglang_scrapes;
DROP VIEW v_vllm_histogram_deltas;
DROP VIEW v_vllm_metrics_deltas;
DROP VIEW v_vllm_scrapes;
DROP VIEW v_vllm_metrics;
DROP TABLE vllm_metrics_samples;

CREATE VIEW v_serving_metrics AS
SELECT m.*, r.host
FROM serving_metrics_samples m JOIN runs r USING (run_id);

-- The old contract: vLLM's samples, `engine` being vLLM's engine label.
CREATE VIEW v_vllm_metrics AS
SELECT m.run_id, m.scraped_at, m.url, m.metric, m.kind, m.sample, m.model_name,
       m.engine_index AS engine, m.labels, m.le, m.value, m.host
FROM v_serving_metrics m WHERE m.engine = 'vllm';

CREATE VIEW v_sglang_metrics AS
SELECT m.run_id, m.scraped_at, m.url, m.metric, m.kind, m.sample, m.model_name, m.labels,
       m.le, m.value, m.host
FROM v_serving_metrics m WHERE m.engine = 'sglang';

-- One row per engine, scrape and served model. Each measure names its family in every
-- engine (the names carry the prefix, so one IN list serves both); an older name comes
-- second in a coalesce. Only these samples make a row: a family without a model_name label
-- (vLLM's cache_config_info, SGLang's func_latency_seconds) is no served model.
-- SGLang's older sglang:time_per_output_token_seconds is observed once per output token
-- (its docs' example: count 7,400,757 against 7,557,572 generated tokens and 11,008
-- requests), so it is that era's inter-token latency, not a per-request TPOT.
CREATE VIEW v_serving_scrapes AS
SELECT engine, run_id, host, url, model_name, scraped_at,
    sum(value) FILTER (WHERE sample IN ('vllm:num_requests_running',
                                        'sglang:num_running_reqs')) AS running,
    sum(value) FILTER (WHERE sample IN ('vllm:num_requests_waiting',
                                        'sglang:num_queue_reqs')) AS waiting,
    coalesce(avg(value) FILTER (WHERE sample IN ('vllm:kv_cache_usage_perc',
                                                 'sglang:token_usage')),
             avg(value) FILTER (WHERE sample = 'vllm:gpu_cache_usage_perc')) AS kv_cache_usage,
    sum(value) FILTER (WHERE sample = 'sglang:gen_throughput') AS gen_throughput,
    avg(value) FILTER (WHERE sample = 'sglang:cache_hit_rate') AS cache_hit_rate,
    sum(value) FILTER (WHERE sample IN ('vllm:prompt_tokens_total',
                                        'sglang:prompt_tokens_total')) AS prompt_tokens,
    sum(value) FILTER (WHERE sample IN ('vllm:generation_tokens_total',
                                        'sglang:generation_tokens_total')) AS generation_tokens,
    sum(value) FILTER (WHERE sample IN ('vllm:request_success_total',
                                        'sglang:num_requests_total')) AS requests_finished,
    sum(value) FILTER (WHERE sample = 'vllm:num_preemptions_total') AS preemptions,
    coalesce(sum(value) FILTER (WHERE sample IN ('vllm:inter_token_latency_seconds_sum',
                                                 'sglang:inter_token_latency_seconds_sum')),
             sum(value) FILTER (WHERE sample IN ('vllm:time_per_output_token_seconds_sum',
                                                 'sglang:time_per_output_token_seconds_sum'))
    ) AS itl_sum_s,
    coalesce(sum(value) FILTER (WHERE sample IN ('vllm:inter_token_latency_seconds_count',
                                                 'sglang:inter_token_latency_seconds_count')),
             sum(value) FILTER (WHERE sample IN ('vllm:time_per_output_token_seconds_count',
                                                 'sglang:time_per_output_token_seconds_count'))
    ) AS itl_count,
    sum(value) FILTER (WHERE sample = 'vllm:request_time_per_output_token_seconds_sum') AS tpot_sum_s,
    sum(value) FILTER (WHERE sample = 'vllm:request_time_per_output_token_seconds_count') AS tpot_count,
    sum(value) FILTER (WHERE sample IN ('vllm:time_to_first_token_seconds_sum',
                                        'sglang:time_to_first_token_seconds_sum')) AS ttft_sum_s,
    sum(value) FILTER (WHERE sample IN ('vllm:time_to_first_token_seconds_count',
                                        'sglang:time_to_first_token_seconds_count')) AS ttft_count,
    sum(value) FILTER (WHERE sample IN ('vllm:e2e_request_latency_seconds_sum',
                                        'sglang:e2e_request_latency_seconds_sum')) AS e2e_sum_s,
    sum(value) FILTER (WHERE sample IN ('vllm:e2e_request_latency_seconds_count',
                                        'sglang:e2e_request_latency_seconds_count')) AS e2e_count
FROM v_serving_metrics
WHERE sample IN (
    'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
    'vllm:gpu_cache_usage_perc', 'vllm:prompt_tokens_total', 'vllm:generation_tokens_total',
    'vllm:request_success_total', 'vllm:num_preemptions_total',
    'vllm:inter_token_latency_seconds_sum', 'vllm:inter_token_latency_seconds_count',
    'vllm:time_per_output_token_seconds_sum', 'vllm:time_per_output_token_seconds_count',
    'vllm:request_time_per_output_token_seconds_sum',
    'vllm:request_time_per_output_token_seconds_count',
    'vllm:time_to_first_token_seconds_sum', 'vllm:time_to_first_token_seconds_count',
    'vllm:e2e_request_latency_seconds_sum', 'vllm:e2e_request_latency_seconds_count',
    'sglang:num_running_reqs', 'sglang:num_queue_reqs', 'sglang:token_usage',
    'sglang:gen_throughput', 'sglang:cache_hit_rate', 'sglang:prompt_tokens_total',
    'sglang:generation_tokens_total', 'sglang:num_requests_total',
    'sglang:inter_token_latency_seconds_sum', 'sglang:inter_token_latency_seconds_count',
    'sglang:time_per_output_token_seconds_sum', 'sglang:time_per_output_token_seconds_count',
    'sglang:time_to_first_token_seconds_sum', 'sglang:time_to_first_token_seconds_count',
    'sglang:e2e_request_latency_seconds_sum', 'sglang:e2e_request_latency_seconds_count')
GROUP BY engine, run_id, host, url, model_name, scraped_at;

-- Between consecutive scrapes of one server and model: rates and mean latencies of that
-- interval. The first scrape, an empty interval or a counter that went down (a restart)
-- gives NULL, never a negative or a division by zero.
CREATE VIEW v_serving_metrics_deltas AS
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
    FROM v_serving_scrapes
    WINDOW w AS (PARTITION BY engine, host, url, model_name ORDER BY scraped_at)
)
SELECT engine, run_id, prev_run_id, host, url, model_name, scraped_at, interval_s,
    running, waiting, kv_cache_usage, gen_throughput, cache_hit_rate, preemptions,
    CASE WHEN d_gen >= 0 AND interval_s > 0 THEN d_gen / interval_s END AS generation_tokens_per_s,
    CASE WHEN d_prompt >= 0 AND interval_s > 0 THEN d_prompt / interval_s END AS prompt_tokens_per_s,
    CASE WHEN d_req >= 0 AND interval_s > 0 THEN d_req / interval_s END AS requests_per_s,
    CASE WHEN d_itl_n > 0 AND d_itl_sum >= 0 THEN 1000.0 * d_itl_sum / d_itl_n END AS mean_itl_ms,
    CASE WHEN d_tpot_n > 0 AND d_tpot_sum >= 0 THEN 1000.0 * d_tpot_sum / d_tpot_n END AS mean_tpot_ms,
    CASE WHEN d_ttft_n > 0 AND d_ttft_sum >= 0 THEN 1000.0 * d_ttft_sum / d_ttft_n END AS mean_ttft_ms,
    CASE WHEN d_e2e_n > 0 AND d_e2e_sum >= 0 THEN 1000.0 * d_e2e_sum / d_e2e_n END AS mean_e2e_ms
FROM d;

-- Histogram bucket counts added between consecutive scrapes (summed over engine cores and
-- ranks), for interval quantiles (store/queries_serving.py interpolates them like
-- Prometheus' histogram_quantile).
CREATE VIEW v_serving_histogram_deltas AS
WITH b AS (
    SELECT engine, run_id, host, url, model_name, scraped_at, metric, le, sum(value) AS cumulative
    FROM v_serving_metrics
    WHERE sample = metric || '_bucket'
    GROUP BY engine, run_id, host, url, model_name, scraped_at, metric, le
), d AS (
    SELECT *, cumulative - lag(cumulative) OVER
              (PARTITION BY engine, host, url, model_name, metric, le ORDER BY scraped_at) AS added
    FROM b
)
SELECT engine, run_id, host, url, model_name, scraped_at, metric, le, cumulative,
       CASE WHEN added >= 0 THEN added END AS added
FROM d;

-- The engine views keep the columns they had before 0010.
CREATE VIEW v_vllm_scrapes AS
SELECT run_id, host, url, model_name, scraped_at, running, waiting, kv_cache_usage,
       prompt_tokens, generation_tokens, requests_finished, preemptions, itl_sum_s, itl_count,
       tpot_sum_s, tpot_count, ttft_sum_s, ttft_count, e2e_sum_s, e2e_count
FROM v_serving_scrapes WHERE engine = 'vllm';

CREATE VIEW v_vllm_metrics_deltas AS
SELECT run_id, prev_run_id, host, url, model_name, scraped_at, interval_s,
       running, waiting, kv_cache_usage, generation_tokens_per_s, prompt_tokens_per_s,
       requests_per_s, mean_itl_ms, mean_tpot_ms, mean_ttft_ms, mean_e2e_ms
FROM v_serving_metrics_deltas WHERE engine = 'vllm';

CREATE VIEW v_vllm_histogram_deltas AS
SELECT run_id, host, url, model_name, scraped_at, metric, le, cumulative, added
FROM v_serving_histogram_deltas WHERE engine = 'vllm';

CREATE VIEW v_sglang_scrapes AS
SELECT run_id, host, url, model_name, scraped_at, running, waiting, kv_cache_usage,
       gen_throughput, cache_hit_rate, prompt_tokens, generation_tokens, requests_finished,
       itl_sum_s, itl_count, ttft_sum_s, ttft_count, e2e_sum_s, e2e_count
FROM v_serving_scrapes WHERE engine = 'sglang';

CREATE VIEW v_sglang_metrics_deltas AS
SELECT run_id, host, url, model_name, scraped_at, interval_s,
       running, waiting, kv_cache_usage, gen_throughput, cache_hit_rate,
       generation_tokens_per_s, prompt_tokens_per_s, requests_per_s, mean_itl_ms,
       mean_tpot_ms,  -- NULL: SGLang exports no per-request TPOT histogram
       mean_ttft_ms, mean_e2e_ms
FROM v_serving_metrics_deltas WHERE engine = 'sglang';

CREATE VIEW v_sglang_histogram_deltas AS
SELECT run_id, host, url, model_name, scraped_at, metric, le, cumulative, added
FROM v_serving_histogram_deltas WHERE engine = 'sglang';
