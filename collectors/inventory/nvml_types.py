"""What collectors/inventory/nvml.py and collectors/inventory/nvml_detail.py share: the GPU records they build
and the ``Reader`` every NVML call goes through.

Both import this module and it imports neither, so neither needs the other for its types.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

SYSFS_ENV = "STEPSCOPE_SYSFS_ROOT"  # tests point it at a temp tree shaped like /sys


@dataclass
class GpuInfo:
    index: int
    name: str
    uuid: str | None
    memory_bytes: int | None
    pci_bus_id: str
    mig_enabled: bool | None = None  # None: not MIG-capable


@dataclass
class GpuInventory:
    driver_version: str
    cuda_driver_version: str | None  # e.g. "12.8", from nvmlSystemGetCudaDriverVersion
    gpus: list[GpuInfo] = field(default_factory=list)


@dataclass
class NvLink:
    link: int
    active: bool
    version: int | None  # NVLink generation: 4 for NVLink 4.0
    remote_pci_bus_id: str | None
    remote_type: str | None  # gpu | switch | ibmnpu | unknown; None when NVML cannot say


@dataclass
class GpuDetail(GpuInfo):
    """One GPU as the ``gpu`` collector records it; None = the GPU/driver cannot say."""

    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    power_limit_w: float | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    mem_bus_width_bits: int | None = None
    numa_node: int | None = None  # the CPU NUMA node the GPU hangs off (sysfs)
    cpu_affinity: str | None = None  # "0-15,32-47" like nvidia-smi topo -m
    nvlinks: list[NvLink] = field(default_factory=list)
    mig_uuids: list[str] = field(default_factory=list)  # "MIG-..." of each instance

    @property
    def nvlink_active(self) -> int:
        """Active NVLinks; 0 for a GPU without NVLink (every link query unsupported)."""
        return sum(1 for link in self.nvlinks if link.active)

    @property
    def mem_bandwidth_gbps(self) -> float | None:
        return mem_bandwidth_gbps(self.mem_clock_max_mhz, self.mem_bus_width_bits)


@dataclass
class Topology:
    """The full NVML picture: GPUs, the topo -m matrix and the four P2P matrices.

    Matrices are indexed by position in ``gpus`` (equal to the NVML index unless a GPU
    could not be opened)."""

    driver_version: str | None
    cuda_driver_version: str | None
    gpus: list[GpuDetail]
    topology: list[list[str | None]]  # [a][b]: X, NV#, PIX, PXB, PHB, NODE, SYS; None unknown
    p2p: dict[str, list[list[str | None]]]  # cap -> [a][b]: X, OK, CNS, GNS, TNS, DIS, NS, U
    unsupported: Counter[str] = field(default_factory=Counter)  # NVML function -> failures


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def const(nvml: ModuleType, name: str, default: int) -> int:
    """An NVML enum value from the module. pynvml 13.x defines NVML_P2P_CAPS_INDEX_READ as
    the tuple ``(0,)`` (a stray comma), which ctypes cannot pass, so tuples are unwrapped."""
    value = getattr(nvml, name, default)
    if isinstance(value, tuple):
        value = value[0] if value else default
    return int(value)


class Reader:
    """Calls NVML functions by name; an unsupported value becomes None and is counted."""

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        self.error: type[BaseException] = getattr(nvml, "NVMLError", Exception)
        self.unsupported: Counter[str] = Counter()

    def __call__(self, name: str, *args: Any, quiet: bool = False) -> Any:
        try:
            return getattr(self.nvml, name)(*args)
        except (self.error, AttributeError):
            if not quiet:
                self.unsupported[name] += 1
            return None


def mem_bandwidth_gbps(mem_clock_mhz: int | None, bus_width_bits: int | None) -> float | None:
    """Theoretical memory bandwidth in GB/s: clock x 2 (double data rate) x bus bytes.

    NVML's max memory clock is half the per-pin data rate for HBM2/HBM3 and GDDR6X/GDDR7 as
    it reports them (H100 SXM 2619 MHz x 2 x 5120 bit / 8 = 3352 GB/s, the 3.35 TB/s spec).
    """
    if not mem_clock_mhz or not bus_width_bits:
        return None
    return round(mem_clock_mhz * 1e6 * 2 * bus_width_bits / 8 / 1e9, 1)
