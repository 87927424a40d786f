"""``python -m collectors gpu`` as a user runs it: real CLI, real store, NVML stand-in specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.inventory.nvml import ENV_MODULE
from tests.gpu.conftest import MIXED, NVLINK, PCIE, fake_env
from tests.helpers import query, run_cli


def test_pcie_host_commits_every_table(store_path: Path) -> None:
    result = run_cli(store_path, "gpu", "--json", "--host", "pcie-box", **fake_env(PCIE))
    assert result.code == 0, result.stderr
    summary = result.json
    assert summary["committed"] is True
    assert summary["gpu_count"] == 8 and summary["interconnect"] == "pcie-only"
    assert summary["gpu_model"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert summary["driver"] == "580.95.05"
    run_id = summary["run_id"]
    assert "8x NVIDIA RTX PRO 6000 Blackwell Server Edition, pcie-only" in result.stderr
    host = query(store_path, "SELECT host, nvml_available, gpu_count, interconnect_class, "
                 "cuda_driver_version, message FROM v_gpu_host WHERE run_id = ?", [run_id])  # fmt: skip
    assert host == [("pcie-box", True, 8, "pcie-only", "13.0", None)]
    devices = query(store_path, "SELECT gpu_index, pcie_gen_current, pcie_gen_max, "
                    "pcie_width_max, nvlink_active, mem_bandwidth_gbps, numa_node, cpu_affinity "
                    "FROM v_gpu_devices WHERE run_id = ? ORDER BY gpu_index", [run_id])  # fmt: skip
    assert len(devices) == 8
    assert devices[7] == (7, 1, 5, 16, 0, 1597.6, 1, "48-95,144-191")
    links = query(store_path, "SELECT topology, p2p_read, count(*) FROM v_gpu_links "
                  "WHERE run_id = ? GROUP BY ALL ORDER BY ALL", [run_id])  # fmt: skip
    assert links == [("NODE", "OK", 16), ("PIX", "OK", 8), ("SYS", "OK", 32), ("X", "X", 8)]
    assert query(store_path, "SELECT count(*) FROM gpu_nvlinks")[0][0] == 0
    runs = query(store_path, "SELECT verb, gpu_count, gpu_model FROM v_runs WHERE run_id = ?",
                 [run_id])  # fmt: skip
    assert runs == [("gpu", 8, "NVIDIA RTX PRO 6000 Blackwell Server Edition")]


def test_nvlink_and_mixed_hosts(store_path: Path) -> None:
    nv = run_cli(store_path, "gpu", "--json", "--host", "hgx", **fake_env(NVLINK))
    mixed = run_cli(store_path, "gpu", "--json", "--host", "mixbox", **fake_env(MIXED))
    assert nv.code == 0 and mixed.code == 0, nv.stderr + mixed.stderr
    assert nv.json["interconnect"] == "nvlink" and mixed.json["interconnect"] == "mixed"
    rows = query(store_path, "SELECT host, interconnect_class, message FROM v_gpu_host "
                 "ORDER BY host")  # fmt: skip
    assert rows[0][:2] == ("hgx", "nvlink") and rows[0][2] is None
    # The older driver's unsupported values are named in the run, and stored as NULL.
    assert rows[1][:2] == ("mixbox", "mixed") and "nvmlDeviceGetMemoryBusWidth (4)" in rows[1][2]
    # nvmlDeviceGetNumaNodeId is NotSupported on PCIe hosts by design: never a warning.
    assert "NumaNodeId" not in rows[1][2]
    assert "NULL" in mixed.stderr
    nvlinks = query(store_path, "SELECT count(*), min(version), max(remote_device_type) "
                    "FROM v_gpu_nvlinks WHERE host = 'hgx' AND active")  # fmt: skip
    assert nvlinks == [(8 * 18, 4, "switch")]
    assert query(store_path, "SELECT count(*) FROM v_gpu_devices WHERE host = 'mixbox' "
                 "AND numa_node = 0 AND mem_bandwidth_gbps IS NULL")[0][0] == 4  # fmt: skip


def test_no_nvidia_gpu_records_a_run_that_says_so(store_path: Path) -> None:
    # The real pynvml on this machine (no driver): no stand-in involved.
    result = run_cli(store_path, "gpu", "--json", **{ENV_MODULE: "pynvml"})
    assert result.code == 0, result.stderr
    if result.json["gpu_count"]:
        pytest.skip("this machine has an NVIDIA GPU: the no-GPU path cannot be seen here")
    assert result.json["interconnect"] == "none" and result.json["driver"] is None
    assert "no NVIDIA" in result.stderr and "Traceback" not in result.stderr
    rows = query(store_path, "SELECT nvml_available, gpu_count, interconnect_class, message "
                 "FROM v_gpu_host")  # fmt: skip
    assert rows[0][:3] == (False, 0, "none") and "no NVIDIA" in rows[0][3]
    status = query(store_path, "SELECT status, message FROM v_runs WHERE verb = 'gpu'")
    assert status[0][0] == "ok" and "no NVIDIA" in status[0][1]
    assert query(store_path, "SELECT count(*) FROM gpu_devices")[0][0] == 0


def test_dry_run_commits_nothing(store_path: Path) -> None:
    result = run_cli(store_path, "gpu", "--json", "--dry-run", **fake_env(PCIE))
    assert result.code == 0 and result.json["committed"] is False
    assert not store_path.exists()
