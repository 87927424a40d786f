-- 0004: the `gpu` collector's NVML inventory: GPUs, PCIe/NVLink, P2P and topology matrices,
-- and the host's interconnect class (pcie-only | nvlink | mixed | none) the planner reads.
-- NULL in any measured column = the GPU or driver could not report it (NVML NotSupported).

CREATE TABLE gpu_host (
    run_id VARCHAR NOT NULL,
    nvml_available BOOLEAN NOT NULL,  -- false: no NVIDIA driver/GPU (message says why)
    driver_version VARCHAR,
    cuda_driver_version VARCHAR,      -- CUDA version the driver supports, e.g. "12.8"
    gpu_count INTEGER NOT NULL,
    gpu_model VARCHAR,                -- "NVIDIA H100 80GB HBM3" (models joined by " + ")
    interconnect_class VARCHAR NOT NULL,
    message VARCHAR
);

CREATE TABLE gpu_devices (
    run_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,       -- NVML index (nvidia-smi order, not CUDA_VISIBLE_DEVICES)
    name VARCHAR,
    uuid VARCHAR,
    memory_bytes BIGINT,
    pci_bus_id VARCHAR,
    pcie_gen_current INTEGER,         -- drops at idle (power saving); max is what the slot gives
    pcie_gen_max INTEGER,
    pcie_width_current INTEGER,
    pcie_width_max INTEGER,
    nvlink_active INTEGER,            -- active NVLinks; 0 on a GPU without NVLink
    power_limit_w DOUBLE,             -- enforced power limit
    sm_clock_max_mhz INTEGER,
    mem_clock_max_mhz INTEGER,
    mem_bus_width_bits INTEGER,
    mem_bandwidth_gbps DOUBLE,        -- theoretical: mem clock x 2 x bus width / 8
    numa_node INTEGER,
    cpu_affinity VARCHAR              -- "0-47,96-143" as nvidia-smi topo -m prints it
);

-- Every ordered GPU pair, diagonal included (topology and p2p_* = 'X'), so a pivot gives
-- the `nvidia-smi topo -m` and `topo -p2p` matrices directly.
CREATE TABLE gpu_links (
    run_id VARCHAR NOT NULL,
    gpu_a INTEGER NOT NULL,
    gpu_b INTEGER NOT NULL,
    topology VARCHAR,                 -- X, NV#, PIX, PXB, PHB, NODE, SYS
    p2p_read VARCHAR,                 -- OK, CNS, GNS, TNS, DIS, NS, U (nvidia-smi codes)
    p2p_write VARCHAR,
    p2p_nvlink VARCHAR,
    p2p_atomics VARCHAR
);

CREATE TABLE gpu_nvlinks (
    run_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,
    link INTEGER NOT NULL,
    active BOOLEAN,
    version INTEGER,                  -- NVLink generation (4 = NVLink 4.0)
    remote_pci_bus_id VARCHAR,
    remote_device_type VARCHAR        -- gpu | switch | ibmnpu | unknown
);

CREATE VIEW v_gpu_host AS
SELECT g.run_id, r.host, r.label, r.finished_at, r.status, g.nvml_available,
       g.driver_version, g.cuda_driver_version, g.gpu_count, g.gpu_model,
       g.interconnect_class, g.message
FROM gpu_host g JOIN runs r USING (run_id);

CREATE VIEW v_gpu_devices AS
SELECT d.*, r.host, r.finished_at
FROM gpu_devices d JOIN runs r USING (run_id);

CREATE VIEW v_gpu_links AS
SELECT l.*, r.host, r.finished_at
FROM gpu_links l JOIN runs r USING (run_id);

CREATE VIEW v_gpu_nvlinks AS
SELECT n.*, r.host, r.finished_at
FROM gpu_nvlinks n JOIN runs r USING (run_id);
