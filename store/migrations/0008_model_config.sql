-- 0008: the served model's HF config.json (and ModelOpt hf_quant_config.json) recorded with a
-- vllm-profile / vllm-bench run, so the planner can predict for it (collectors/model_config.py).

CREATE TABLE serving_model_config (
    run_id VARCHAR NOT NULL,
    model_id VARCHAR,                 -- the served model id (what the client asked for)
    source_path VARCHAR,              -- the config.json file it was read from on the host
    config_json VARCHAR,              -- the file's text, as found
    quant_config_json VARCHAR         -- hf_quant_config.json beside it (NULL when none)
);

CREATE VIEW v_serving_model_config AS
SELECT c.*, r.host, r.label, r.verb, r.finished_at, r.gpu_model, r.gpu_count, r.status
FROM serving_model_config c JOIN runs r USING (run_id);
