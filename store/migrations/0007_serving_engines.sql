-- 0007: serving engines side by side (vLLM, SGLang), printed-log imports, goodput and
-- speculative-decoding results, SGLang profile runs.

ALTER TABLE serving_bench ADD COLUMN engine VARCHAR;          -- vllm | sglang (the server measured)
ALTER TABLE serving_bench ADD COLUMN engine_version VARCHAR;  -- the server's version, when known
ALTER TABLE serving_bench ADD COLUMN result_format VARCHAR;   -- json | jsonl | printed
ALTER TABLE serving_bench ADD COLUMN request_goodput DOUBLE;  -- requests/s meeting --goodput SLOs
ALTER TABLE serving_bench ADD COLUMN spec_acceptance_rate DOUBLE;    -- percent of draft tokens accepted
ALTER TABLE serving_bench ADD COLUMN spec_acceptance_length DOUBLE;  -- mean tokens per step (1 + accepted/drafts)
ALTER TABLE serving_bench ADD COLUMN spec_drafts BIGINT;
ALTER TABLE serving_bench ADD COLUMN spec_draft_tokens BIGINT;
ALTER TABLE serving_bench ADD COLUMN spec_accepted_tokens BIGINT;

-- Rows written before 0007 were all vLLM's.
UPDATE serving_bench SET engine = 'vllm', engine_version = vllm_version WHERE engine IS NULL;

CREATE OR REPLACE VIEW v_serving_bench AS
SELECT b.*, r.host, r.label, r.finished_at, r.gpu_model, r.gpu_count, r.status
FROM serving_bench b JOIN runs r USING (run_id);

-- The SGLang server an sglang-profile run measured (one row per run).
CREATE TABLE sglang_server (
    run_id VARCHAR NOT NULL,
    url VARCHAR,
    model_id VARCHAR,
    sglang_version VARCHAR,
    tp INTEGER, pp INTEGER, dp INTEGER, ep BOOLEAN,
    layout VARCHAR, layout_kind VARCHAR, layout_source VARCHAR,
    server_args VARCHAR,
    profile_id VARCHAR,               -- the trace files' name prefix
    trace_dir VARCHAR,
    trace_files INTEGER,
    flush_wait_s DOUBLE,
    num_requests INTEGER, concurrency INTEGER, input_len INTEGER, output_len INTEGER
);

CREATE VIEW v_sglang_servers AS
SELECT s.*, r.host, r.label, r.finished_at, r.gpu_model, r.gpu_count, r.status, r.message
FROM sglang_server s JOIN runs r USING (run_id);

-- vLLM's scrape view keeps to vllm:* samples now that SGLang's share the table.
CREATE OR REPLACE VIEW v_vllm_scrapes AS
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
WHERE metric LIKE 'vllm:%'
GROUP BY run_id, host, url, model_name, scraped_at;

-- sglang-metrics scrapes land in vllm_metrics_samples too (metric names carry the engine's
-- prefix, sglang:*); one row per scrape and served model, as v_vllm_scrapes.
CREATE VIEW v_sglang_scrapes AS
SELECT run_id, host, url, model_name, scraped_at,
    sum(value) FILTER (WHERE sample = 'sglang:num_running_reqs') AS running,
    sum(value) FILTER (WHERE sample = 'sglang:num_queue_reqs') AS waiting,
    avg(value) FILTER (WHERE sample = 'sglang:token_usage') AS kv_cache_usage,
    sum(value) FILTER (WHERE sample = 'sglang:gen_throughput') AS gen_throughput,
    avg(value) FILTER (WHERE sample = 'sglang:cache_hit_rate') AS cache_hit_rate,
    sum(value) FILTER (WHERE sample = 'sglang:prompt_tokens_total') AS prompt_tokens,
    sum(value) FILTER (WHERE sample = 'sglang:generation_tokens_total') AS generation_tokens,
    sum(value) FILTER (WHERE sample = 'sglang:num_requests_total') AS requests_finished,
    sum(value) FILTER (WHERE sample = 'sglang:inter_token_latency_seconds_sum') AS itl_sum_s,
    sum(value) FILTER (WHERE sample = 'sglang:inter_token_latency_seconds_count') AS itl_count,
    sum(value) FILTER (WHERE sample = 'sglang:time_to_first_token_seconds_sum') AS ttft_sum_s,
    sum(value) FILTER (WHERE sample = 'sglang:time_to_first_token_seconds_count') AS ttft_count,
    sum(value) FILTER (WHERE sample = 'sglang:e2e_request_latency_seconds_sum') AS e2e_sum_s,
    sum(value) FILTER (WHERE sample = 'sglang:e2e_request_latency_seconds_count') AS e2e_count
FROM v_vllm_metrics
WHERE metric LIKE 'sglang:%'
GROUP BY run_id, host, url, model_name, scraped_at;

-- Between consecutive scrapes of one SGLang server: rates and mean latencies of that
-- interval (as v_vllm_metrics_deltas; a counter that went down gives NULL).
CREATE VIEW v_sglang_metrics_deltas AS
WITH d AS (
    SELECT *,
        date_diff('millisecond', lag(scraped_at) OVER w, scraped_at) / 1000.0 AS interval_s,
        generation_tokens - lag(generation_tokens) OVER w AS d_gen,
        prompt_tokens - lag(prompt_tokens) OVER w AS d_prompt,
        requests_finished - lag(requests_finished) OVER w AS d_req,
        itl_sum_s - lag(itl_sum_s) OVER w AS d_itl_sum, itl_count - lag(itl_count) OVER w AS d_itl_n,
        ttft_sum_s - lag(ttft_sum_s) OVER w AS d_ttft_sum, ttft_count - lag(ttft_count) OVER w AS d_ttft_n,
        e2e_sum_s - lag(e2e_sum_s) OVER w AS d_e2e_sum, e2e_count - lag(e2e_count) OVER w AS d_e2e_n
    FROM v_sglang_scrapes
    WINDOW w AS (PARTITION BY host, url, model_name ORDER BY scraped_at)
)
SELECT run_id, host, url, model_name, scraped_at, interval_s,
    running, waiting, kv_cache_usage, gen_throughput, cache_hit_rate,
    CASE WHEN d_gen >= 0 AND interval_s > 0 THEN d_gen / interval_s END AS generation_tokens_per_s,
    CASE WHEN d_prompt >= 0 AND interval_s > 0 THEN d_prompt / interval_s END AS prompt_tokens_per_s,
    CASE WHEN d_req >= 0 AND interval_s > 0 THEN d_req / interval_s END AS requests_per_s,
    CASE WHEN d_itl_n > 0 AND d_itl_sum >= 0 THEN 1000.0 * d_itl_sum / d_itl_n END AS mean_itl_ms,
    CAST(NULL AS DOUBLE) AS mean_tpot_ms,  -- SGLang exports no per-request TPOT histogram
    CASE WHEN d_ttft_n > 0 AND d_ttft_sum >= 0 THEN 1000.0 * d_ttft_sum / d_ttft_n END AS mean_ttft_ms,
    CASE WHEN d_e2e_n > 0 AND d_e2e_sum >= 0 THEN 1000.0 * d_e2e_sum / d_e2e_n END AS mean_e2e_ms
FROM d;
