-- 0012 (issue 43): Nsight Systems imports, and the host an imported profile belongs to.

-- A kernel's shortName as an nsys export names it (`par_ranged2d_kernel` for its 102
-- demangled forms), for display; NULL for Kineto traces, which name kernels one way.
ALTER TABLE trace_kernel_stats ADD COLUMN short_name VARCHAR;

CREATE OR REPLACE VIEW v_trace_kernel_stats AS
SELECT run_id, rank, name, category, dtype, calls, total_us, min_us, max_us, steps_seen,
       total_us / nullif(calls, 0) AS avg_us, short_name
FROM trace_kernel_stats;

-- One row per host. What the host is (GPUs, OS, CPU, driver) comes only from runs that
-- took this machine's own inventory: never from a file imported from elsewhere (`trace`,
-- `nccl-tests`), whose GPUs are the recording job's, whatever machine imported it. Those
-- show apart, as the GPUs the host's imported profiles name.
CREATE OR REPLACE VIEW v_hosts AS
SELECT host,
       arg_max(gpu_model, finished_at) FILTER (WHERE verb NOT IN ('trace', 'nccl-tests')) AS gpu_model,
       arg_max(gpu_count, finished_at) FILTER (WHERE verb NOT IN ('trace', 'nccl-tests')) AS gpu_count,
       arg_max(os, finished_at) FILTER (WHERE verb NOT IN ('trace', 'nccl-tests')) AS os,
       arg_max(cpu, finished_at) FILTER (WHERE verb NOT IN ('trace', 'nccl-tests')) AS cpu,
       arg_max(cuda_driver, finished_at) FILTER (WHERE verb NOT IN ('trace', 'nccl-tests')) AS cuda_driver,
       max(finished_at) AS last_seen_at,
       count(*) AS runs,
       arg_max(gpu_model, finished_at) FILTER (WHERE verb IN ('trace', 'nccl-tests')) AS imported_gpu_model
FROM runs
GROUP BY host;
