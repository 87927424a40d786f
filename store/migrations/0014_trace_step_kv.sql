-- 0014: what each step's sequences read from the KV cache (issue 42: floors per decode step).
-- vLLM's detailed step annotation, execute_{N}_context_{n}(sq{q}sk{k}sqsq{qq}sqsk{qk})_
-- generation_{m}(sq..sk..), sums over each phase's requests: query tokens (sq), KV tokens
-- including the new ones (sk), squared query tokens (sqsq) and query x key tokens (sqsk).
-- NULL where the annotation does not carry them (older vLLM, SGLang, ProfilerStep, gaps).
ALTER TABLE trace_steps ADD COLUMN context_kv_tokens BIGINT;     -- sum of sk over prefill requests
ALTER TABLE trace_steps ADD COLUMN generation_kv_tokens BIGINT;  -- sum of sk over decode requests: their contexts
ALTER TABLE trace_steps ADD COLUMN context_attended BIGINT;      -- causal query-key pairs of the prompt tokens: sqsk - (sqsq - sq) / 2

CREATE OR REPLACE VIEW v_trace_steps AS
SELECT s.run_id, s.rank, s.step, s.name, s.source, s.start_us, s.wall_us, s.busy_us,
       s.wall_us - s.busy_us AS idle_us, s.context_tokens, s.generation_tokens,
       s.context_requests, s.generation_requests,
       (SELECT sum(c.total_us) FROM trace_step_categories c
        WHERE c.run_id = s.run_id AND c.rank = s.rank AND c.step = s.step
          AND c.category IN ('allreduce', 'all_to_all', 'allgather', 'reduce_scatter',
                             'other_comm')) AS comm_us,
       s.context_kv_tokens, s.generation_kv_tokens, s.context_attended
FROM trace_steps s;
