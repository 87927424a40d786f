"""Named queries for the Hardware page (the ``gpu`` collector's tables). Bound parameters only."""

from __future__ import annotations

import pandas as pd

from store.location import StoreLocation
from store.reader import query_df


def gpu_runs(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """Every ``gpu`` run (optionally on one host), newest first, with its headline facts."""
    return query_df(
        loc,
        "SELECT run_id, host, label, finished_at, status, nvml_available, gpu_count, gpu_model, "
        "interconnect_class, driver_version, cuda_driver_version, message FROM v_gpu_host "
        "WHERE (?::VARCHAR IS NULL OR host = ?) ORDER BY finished_at DESC, run_id DESC",
        [host, host],
    )


def gpu_host(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """The one v_gpu_host row of a run (empty when the run is unknown)."""
    return query_df(loc, "SELECT * FROM v_gpu_host WHERE run_id = ?", [run_id])


def gpu_devices(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    return query_df(
        loc,
        "SELECT gpu_index, name, uuid, memory_bytes, pci_bus_id, pcie_gen_current, pcie_gen_max, "
        "pcie_width_current, pcie_width_max, nvlink_active, power_limit_w, sm_clock_max_mhz, "
        "mem_clock_max_mhz, mem_bus_width_bits, mem_bandwidth_gbps, numa_node, cpu_affinity "
        "FROM v_gpu_devices WHERE run_id = ? ORDER BY gpu_index",
        [run_id],
    )


def gpu_links(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Every ordered GPU pair of a run (diagonal included, marked X)."""
    return query_df(
        loc,
        "SELECT gpu_a, gpu_b, topology, p2p_read, p2p_write, p2p_nvlink, p2p_atomics "
        "FROM v_gpu_links WHERE run_id = ? ORDER BY gpu_a, gpu_b",
        [run_id],
    )


def topology_counts(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """How many unordered GPU pairs have each topology label (NV18, PIX, SYS, ...)."""
    return query_df(
        loc,
        "SELECT coalesce(topology, 'unknown') AS topology, count(*) AS pairs FROM v_gpu_links "
        "WHERE run_id = ? AND gpu_a < gpu_b GROUP BY 1 ORDER BY pairs DESC, topology",
        [run_id],
    )


def p2p_counts(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Per P2P capability: ordered pairs (a != b) in total and with status OK."""
    return query_df(
        loc,
        "SELECT cap, count(*) AS pairs, count(*) FILTER (WHERE status = 'OK') AS ok "
        "FROM (UNPIVOT (SELECT gpu_a, gpu_b, p2p_read AS read, p2p_write AS write, "
        "p2p_nvlink AS nvlink, p2p_atomics AS atomics FROM v_gpu_links "
        "WHERE run_id = ? AND gpu_a <> gpu_b) "
        "ON read, write, nvlink, atomics INTO NAME cap VALUE status) "
        "GROUP BY cap",
        [run_id],
    )


def nvlink_summary(loc: StoreLocation, run_id: str) -> pd.DataFrame:
    """Per GPU: active NVLinks, their generation and what they connect to."""
    return query_df(
        loc,
        "SELECT gpu_index, count(*) FILTER (WHERE active) AS active_links, "
        "max(version) AS version, "
        "string_agg(DISTINCT remote_device_type, ', ') AS remote_types "
        "FROM v_gpu_nvlinks WHERE run_id = ? GROUP BY gpu_index ORDER BY gpu_index",
        [run_id],
    )
