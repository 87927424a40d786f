"""Per-GPU reads for the ``gpu`` collector: details, NVLinks, NUMA node (sysfs) and MIG.

Every NVML call goes through ``collectors.inventory.nvml_types.Reader``, so an unsupported or failing value
is None and nothing here raises ``NVMLError``.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path
from typing import Any

from collectors.inventory import gpu_topo
from collectors.inventory.gpu_topo import normalize_bus_id
from collectors.inventory.nvml_types import SYSFS_ENV, GpuDetail, NvLink, Reader, const, text

NVLINK_REMOTE = {0: "gpu", 1: "ibmnpu", 2: "switch", 0xFF: "unknown"}
# nvmlNvlinkVersion_t -> NVLink generation (6 = NVLink 4.0 on H100/H200, 7 = 5.0 on B200).
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
CPU_SET_WORDS = 16  # 64-bit words for nvmlDeviceGetCpuAffinity: room for 1024 CPUs


def identity(read: Reader, index: int, handle: Any) -> dict[str, Any]:
    """What every GPU record starts with (GpuInfo's and GpuDetail's first fields)."""
    pci, memory = read("nvmlDeviceGetPciInfo", handle), read("nvmlDeviceGetMemoryInfo", handle)
    uuid = read("nvmlDeviceGetUUID", handle)
    return {"index": index, "name": text(read("nvmlDeviceGetName", handle) or "unknown GPU"),
            "uuid": None if uuid is None else text(uuid),
            "memory_bytes": None if memory is None else int(memory.total),
            "pci_bus_id": text(getattr(pci, "busId", "") or "")}  # fmt: skip


def read_detail(read: Reader, index: int, handle: Any) -> GpuDetail:
    """One GPU as the ``gpu`` collector records it; every value through ``Reader``."""
    nvml = read.nvml
    ident = identity(read, index, handle)

    def num(fn: str, *args: Any) -> int | None:
        value = read(fn, handle, *args)
        return None if value is None else int(value)

    power_mw = read("nvmlDeviceGetEnforcedPowerLimit", handle, quiet=True)
    if power_mw is None:
        power_mw = read("nvmlDeviceGetPowerManagementLimit", handle)
    affinity = read("nvmlDeviceGetCpuAffinity", handle, CPU_SET_WORDS)
    mig_enabled, mig_uuids = read_mig(read, handle)
    return GpuDetail(
        **ident,
        pcie_gen_current=num("nvmlDeviceGetCurrPcieLinkGeneration"),
        pcie_gen_max=num("nvmlDeviceGetMaxPcieLinkGeneration"),
        pcie_width_current=num("nvmlDeviceGetCurrPcieLinkWidth"),
        pcie_width_max=num("nvmlDeviceGetMaxPcieLinkWidth"),
        power_limit_w=None if power_mw is None else int(power_mw) / 1000.0,
        sm_clock_max_mhz=num("nvmlDeviceGetMaxClockInfo", const(nvml, "NVML_CLOCK_SM", 1)),
        mem_clock_max_mhz=num("nvmlDeviceGetMaxClockInfo", const(nvml, "NVML_CLOCK_MEM", 2)),
        mem_bus_width_bits=num("nvmlDeviceGetMemoryBusWidth"),
        numa_node=numa_node(ident["pci_bus_id"], read, handle),
        cpu_affinity=None if affinity is None else gpu_topo.cpu_ranges(list(affinity)),
        nvlinks=_read_nvlinks(read, handle),
        mig_enabled=mig_enabled,
        mig_uuids=mig_uuids,
    )


def numa_node(bus_id: str, read: Reader, handle: Any) -> int | None:
    """The CPU NUMA node the GPU's PCIe device hangs off: ``/sys/bus/pci/devices/<bdf>/
    numa_node`` (Linux; -1 when the platform has one node or cannot say).

    ``nvmlDeviceGetNumaNodeId`` "only applies to platforms where the GPUs are NUMA nodes"
    (nvml.h, CUDA 12.x/13.x: Grace Hopper/Blackwell coherent memory) and answers NotSupported
    on x86 PCIe hosts, so it is only a quiet fallback where sysfs has no answer."""
    bdf = normalize_bus_id(bus_id)
    root = Path(os.environ.get(SYSFS_ENV) or "/sys")
    if bdf:
        with suppress(OSError, ValueError):
            return _numa((root / "bus/pci/devices" / bdf / "numa_node").read_text().strip())
    return _numa(read("nvmlDeviceGetNumaNodeId", handle, quiet=True))


def read_mig(read: Reader, handle: Any) -> tuple[bool | None, list[str]]:
    """MIG mode and the UUIDs of the instances on this GPU (nvml.h: nvmlDeviceGetMigMode ->
    current/pending, nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex,
    which answers NotFound for an empty slot). A GPU without MIG answers NotSupported: its
    normal answer, not counted. NVML lists the parent GPU; CUDA sees the instances."""
    mode = read("nvmlDeviceGetMigMode", handle, quiet=True)
    if mode is None:
        return None, []
    current = mode[0] if isinstance(mode, (list, tuple)) else mode
    enabled = int(current) == const(read.nvml, "NVML_DEVICE_MIG_ENABLE", 1)
    if not enabled:
        return False, []
    uuids = []
    for i in range(int(read("nvmlDeviceGetMaxMigDeviceCount", handle) or 0)):
        mig = read("nvmlDeviceGetMigDeviceHandleByIndex", handle, i, quiet=True)
        if mig is not None and (uuid := read("nvmlDeviceGetUUID", mig)) is not None:
            uuids.append(text(uuid))
    return True, uuids


def _numa(value: Any) -> int | None:
    # sysfs and NVML say -1 (NVML as an unsigned int) when there is no NUMA node to name.
    return None if value is None or int(value) < 0 or int(value) >= 2**31 else int(value)


def _read_nvlinks(read: Reader, handle: Any) -> list[NvLink]:
    """Every link NVML reports a state for. A PCIe-only GPU answers NotSupported for each,
    which is its normal answer, not a missing value: those calls are not counted."""
    links = []
    for link in range(const(read.nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = read("nvmlDeviceGetNvLinkState", handle, link, quiet=True)
        if state is None:
            continue
        active = bool(int(state))
        remote = read("nvmlDeviceGetNvLinkRemotePciInfo", handle, link) if active else None
        kind = read("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link) if active else None
        version = read("nvmlDeviceGetNvLinkVersion", handle, link, quiet=not active)
        links.append(
            NvLink(
                link=link,
                active=active,
                version=None if version is None else NVLINK_GENERATION.get(int(version)),
                remote_pci_bus_id=None if remote is None else text(remote.busId),
                remote_type=None if kind is None else NVLINK_REMOTE.get(int(kind), "unknown"),
            )
        )
    return links
