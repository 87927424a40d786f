"""collectors.inventory.nvml against the NVML stand-in (each machine spec) and the real pynvml here."""

from __future__ import annotations

import json

import pytest

from collectors.inventory import nvml
from collectors.inventory.gpu import host_interconnect
from tests.gpu.conftest import MIXED, NVLINK, PCIE


def test_pcie_only_host(use_spec) -> None:
    use_spec(PCIE)
    topo = nvml.topology_inventory()
    assert len(topo.gpus) == 8 and topo.driver_version == "580.95.05"
    assert topo.cuda_driver_version == "13.0"
    gpu = topo.gpus[0]
    assert gpu.name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert gpu.memory_bytes == 97887 * 2**20
    assert (gpu.pcie_gen_max, gpu.pcie_width_max, gpu.pcie_width_current) == (5, 16, 16)
    assert topo.gpus[7].pcie_gen_current == 1  # idle link, below its Gen5 maximum
    assert gpu.power_limit_w == 600.0 and gpu.nvlink_active == 0 and gpu.nvlinks == []
    assert gpu.numa_node == 0 and gpu.cpu_affinity == "0-47,96-143"
    assert topo.gpus[4].cpu_affinity == "48-95,144-191"
    assert gpu.mem_bandwidth_gbps == pytest.approx(1597.6)
    assert topo.topology[0] == ["X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    off_diagonal = [(a, b) for a in range(8) for b in range(8) if a != b]
    assert all(topo.p2p["read"][a][b] == "OK" for a, b in off_diagonal)
    assert all(topo.p2p["nvlink"][a][b] == "NS" for a, b in off_diagonal)
    assert [topo.p2p[cap][3][3] for cap in ("read", "write", "nvlink", "atomics")] == ["X"] * 4
    assert not topo.unsupported
    assert host_interconnect() == "pcie-only"


def test_nvswitch_host(use_spec) -> None:
    use_spec(NVLINK)
    topo = nvml.topology_inventory()
    assert all(cell == "NV18" for a, row in enumerate(topo.topology)
               for b, cell in enumerate(row) if a != b)  # fmt: skip
    gpu = topo.gpus[5]
    assert gpu.nvlink_active == 18
    assert {(link.version, link.remote_type) for link in gpu.nvlinks} == {(4, "switch")}
    assert gpu.mem_bandwidth_gbps == pytest.approx(3352.3)
    assert topo.p2p["nvlink"][0][7] == "OK" and topo.p2p["atomics"][6][1] == "OK"
    assert host_interconnect() == "nvlink"


def test_mixed_host_degrades_unsupported_values_to_none(use_spec) -> None:
    use_spec(MIXED)
    topo = nvml.topology_inventory()
    assert [row[:4] for row in topo.topology] == [
        ["X", "NV4", "PHB", "PHB"],
        ["NV4", "X", "PHB", "PHB"],
        ["PHB", "PHB", "X", "NV4"],
        ["PHB", "PHB", "NV4", "X"],
    ]
    assert topo.p2p["nvlink"][0][1] == "OK" and topo.p2p["nvlink"][0][2] == "NS"
    # nvmlDeviceGetNumaNodeId is NotSupported here (x86 PCIe), sysfs still names the node.
    assert all(g.numa_node == 0 and g.mem_bus_width_bits is None for g in topo.gpus)
    assert all(g.mem_bandwidth_gbps is None for g in topo.gpus)
    assert topo.gpus[2].nvlinks[0].remote_pci_bus_id == "00000000:61:00.0"
    # nvmlDeviceGetNumaNodeId's NotSupported is its normal x86 answer: no warning.
    assert topo.unsupported == {"nvmlDeviceGetMemoryBusWidth": 4}
    assert host_interconnect() == "mixed"


def test_a_gpu_that_supports_nothing_optional_still_reads(use_spec, spec_variant) -> None:
    every_optional = [
        "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetNumaNodeId",
        "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetP2PStatus",
    ]  # fmt: skip
    use_spec(spec_variant(NVLINK, not_supported=every_optional))
    topo = nvml.topology_inventory()
    gpu = topo.gpus[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.pci_bus_id == "00000000:18:00.0"
    fields = ("uuid", "memory_bytes", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
              "pcie_width_max", "power_limit_w", "sm_clock_max_mhz", "mem_clock_max_mhz",
              "mem_bus_width_bits", "cpu_affinity")  # fmt: skip
    assert all(getattr(gpu, f) is None for f in fields)
    assert gpu.numa_node == 0  # from sysfs, which needs no NVML call
    assert gpu.nvlinks == [] and gpu.nvlink_active == 0
    assert topo.cuda_driver_version is None
    assert topo.topology[0][1] is None and topo.p2p["read"][0][1] is None
    assert topo.unsupported["nvmlDeviceGetP2PStatus"] == 8 * 7 * 4


def test_unknown_nvlink_remote_type_and_a_lost_gpu(use_spec, spec_variant) -> None:
    gpus = json.loads(NVLINK.read_text())["gpus"]
    # GPU 3 cannot be opened (lost): it is left out, the others keep their NVML index.
    gpus[3] = {**gpus[3], "not_supported": ["nvmlDeviceGetHandleByIndex"]}
    use_spec(spec_variant(NVLINK, gpus=gpus, not_supported=["nvmlDeviceGetNvLinkRemoteDeviceType"]))
    topo = nvml.topology_inventory()
    assert [g.index for g in topo.gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert topo.topology[0][1] == "NV18"  # remote type unknown: the switch is inferred
    assert topo.unsupported["nvmlDeviceGetHandleByIndex"] == 1


def test_pynvml_p2p_read_constant_is_unwrapped() -> None:
    pynvml = pytest.importorskip("pynvml")
    assert nvml.const(pynvml, "NVML_P2P_CAPS_INDEX_READ", 0) == 0
    assert nvml.const(pynvml, "NVML_P2P_CAPS_INDEX_ATOMICS", 3) == 3
    assert nvml.const(pynvml, "NVML_NO_SUCH_CONSTANT", 7) == 7


def test_env_inventory_still_works_through_the_adapter(use_spec) -> None:
    use_spec(MIXED)
    inv = nvml.inventory()
    assert inv.driver_version == "535.183.01" and inv.cuda_driver_version == "12.2"
    assert [g.pci_bus_id for g in inv.gpus][:2] == ["00000000:01:00.0", "00000000:21:00.0"]


def test_driver_not_loaded_is_nvml_unavailable(use_spec, spec_variant) -> None:
    use_spec(spec_variant(PCIE, init_error="DRIVER_NOT_LOADED"))
    with pytest.raises(nvml.NvmlUnavailable, match="DRIVER_NOT_LOADED|Driver"):
        nvml.topology_inventory()
    assert host_interconnect() == "none"


def test_real_pynvml_without_a_gpu_is_nvml_unavailable(monkeypatch) -> None:
    monkeypatch.delenv(nvml.ENV_MODULE, raising=False)
    pytest.importorskip("pynvml")
    try:
        with nvml.session():
            pytest.skip("this machine has a working NVIDIA driver: the no-GPU path is not testable")
    except nvml.NvmlUnavailable as exc:
        assert "no NVIDIA driver or GPU" in str(exc)
    with pytest.raises(nvml.NvmlUnavailable):
        nvml.topology_inventory()
    assert host_interconnect() == "none"
