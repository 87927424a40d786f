-- 0009: what the GPU collectors learn on their first real GPU host.
-- comm: the nccl-tests-style figure next to our per-call percentiles, which GPUs a run used,
-- how it timed, and the PCIe link as trained under load. gpu: MIG mode per GPU.

-- nccl-tests' time: each rank's burst mean (one timer around `iters` calls / iters),
-- averaged over ranks (NVIDIA/nccl-tests src/common.cu BenchTime). NULL for older comm runs.
ALTER TABLE comm_results ADD COLUMN burst_us DOUBLE;
ALTER TABLE comm_results ADD COLUMN burst_algbw_gbps DOUBLE;
ALTER TABLE comm_results ADD COLUMN burst_busbw_gbps DOUBLE;

ALTER TABLE comm_meta ADD COLUMN gpus_used VARCHAR;          -- NVML indices of the ranks' GPUs, "0,1"
ALTER TABLE comm_meta ADD COLUMN timing VARCHAR;             -- how per-call times were taken
ALTER TABLE comm_meta ADD COLUMN pcie_gen_loaded INTEGER;    -- min over ranks of the max gen seen while timing
ALTER TABLE comm_meta ADD COLUMN pcie_width_loaded INTEGER;

ALTER TABLE gpu_devices ADD COLUMN mig_enabled BOOLEAN;      -- current MIG mode (NULL: not MIG-capable)
ALTER TABLE gpu_devices ADD COLUMN mig_devices INTEGER;      -- MIG instances present on this GPU

-- nccl_tests_us / nccl_tests_busbw_gbps: one figure comparable across comm and imported
-- nccl-tests runs (an import's one time is already that figure).
CREATE OR REPLACE VIEW v_comm_results AS
SELECT r.run_id, r.op, r.dtype, r.tokens_per_rank, r.hidden, r.bytes, r.count, r.in_place,
       r.iters, r.p50_us, r.p10_us, r.p90_us, r.min_us, r.mean_us, r.algbw_gbps, r.busbw_gbps,
       r.wrong,
       u.host, u.label, u.finished_at, u.verb,
       m.source, m.backend, m.world_size, m.device, m.interconnect, m.graph_mode,
       r.burst_us, r.burst_algbw_gbps, r.burst_busbw_gbps,
       CASE WHEN m.source = 'nccl-tests' THEN r.p50_us ELSE r.burst_us END AS nccl_tests_us,
       CASE WHEN m.source = 'nccl-tests' THEN r.busbw_gbps ELSE r.burst_busbw_gbps END
           AS nccl_tests_busbw_gbps,
       m.gpus_used, m.timing
FROM comm_results r
JOIN runs u ON u.run_id = r.run_id
LEFT JOIN comm_meta m ON m.run_id = r.run_id;

CREATE OR REPLACE VIEW v_gpu_devices AS
SELECT d.*, r.host, r.finished_at
FROM gpu_devices d JOIN runs r USING (run_id);
