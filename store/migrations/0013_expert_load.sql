-- 0013: expert load: routed-token counts per layer and logical expert (SGLang's expert
-- distribution recorder, the `expert-load` collector), the model they belong to, and the
-- busiest EP rank's tokens against the mean rank's under each EP size and placement.

-- One row per run: the recording and the model it was checked against.
CREATE TABLE expert_load_meta (
    run_id VARCHAR NOT NULL,
    model_id VARCHAR,                 -- what --model or the server called the model
    model_name VARCHAR,               -- the planner's name of the model spec
    model_source VARCHAR,             -- where its shape came from (preset, config.json path)
    config_json VARCHAR,              -- the config.json text (NULL: a planner preset)
    engine VARCHAR,                   -- sglang
    recorder_mode VARCHAR,            -- stat | stat_approx | per_pass | per_token | logical_count (JSON)
    files VARCHAR,                    -- JSON list of the files read
    num_layers INTEGER,
    num_experts INTEGER,              -- routed (logical) experts per layer
    top_k INTEGER,
    dense_layers INTEGER,             -- leading layers without routed experts (they hold zeros)
    routed_layers INTEGER,            -- layers that routed any token
    total_count DOUBLE,               -- routed tokens x top-k, summed over layers (x ranks that counted)
    layer_total_spread DOUBLE,        -- (max - min) / max of the routed layers' totals
    forward_passes INTEGER,           -- per_pass / per_token records (NULL for stat)
    recorded_ep INTEGER,              -- EP size of the recorded placement map (NULL: none)
    url VARCHAR,                      -- the server recorded with --url
    sglang_version VARCHAR
);

-- Every layer x logical expert: the tokens routed to it over the recording.
CREATE TABLE expert_load_counts (
    run_id VARCHAR NOT NULL,
    layer INTEGER NOT NULL,
    expert INTEGER NOT NULL,
    count DOUBLE NOT NULL
);

-- Per EP size, placement and routed layer: the busiest rank and its tokens.
CREATE TABLE expert_load_ranks (
    run_id VARCHAR NOT NULL,
    ep_size INTEGER NOT NULL,
    placement VARCHAR NOT NULL,       -- contiguous | balanced | recorded (the run's map)
    layer INTEGER NOT NULL,
    busiest_rank INTEGER,
    max_tokens DOUBLE,
    mean_tokens DOUBLE,
    max_over_mean DOUBLE
);

CREATE VIEW v_expert_load AS
SELECT m.*, r.host, r.label, r.verb, r.finished_at, r.status, r.message
FROM expert_load_meta m JOIN runs r USING (run_id);

CREATE VIEW v_expert_load_counts AS
SELECT c.run_id, c.layer, c.expert, c.count,
       c.count / nullif(sum(c.count) OVER (PARTITION BY c.run_id, c.layer), 0) AS share
FROM expert_load_counts c;

-- Per layer: its total, the hottest expert and its tokens over the mean expert's (NULL for
-- a layer that routed nothing: a dense layer).
CREATE VIEW v_expert_load_layers AS
SELECT run_id, layer, sum(count) AS total, max(count) AS max_count, avg(count) AS mean_count,
       arg_max(expert, count) AS hottest_expert,
       max(count) / nullif(avg(count), 0) AS max_over_mean
FROM expert_load_counts GROUP BY run_id, layer;

CREATE VIEW v_expert_load_ranks AS
SELECT run_id, ep_size, placement, layer, busiest_rank, max_tokens, mean_tokens, max_over_mean,
       max_tokens / nullif(mean_tokens * ep_size, 0) AS busiest_share
FROM expert_load_ranks;

-- Per EP size and placement: the worst layer and the mean over routed layers.
CREATE VIEW v_expert_load_ep AS
SELECT run_id, ep_size, placement, max(max_over_mean) AS worst_max_over_mean,
       arg_max(layer, max_over_mean) AS worst_layer, avg(max_over_mean) AS mean_max_over_mean,
       max(max_tokens / nullif(mean_tokens * ep_size, 0)) AS worst_busiest_share
FROM expert_load_ranks GROUP BY run_id, ep_size, placement;
