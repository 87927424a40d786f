"""The one adapter between Stepscope and NVML (nvidia-ml-py's ``pynvml``); per-GPU reads live in
``collectors/nvml_detail.py``.

Everything that asks the GPUs about themselves goes through here. ``STEPSCOPE_NVML_MODULE``
names a module with pynvml's API to use instead; tests on machines without a GPU point it
at a stand-in (the hardware boundary is the only place one is allowed).

Any single value a GPU or driver cannot report (``NVMLError`` such as NotSupported,
NoPermission or GpuIsLost, or a function this pynvml lacks) becomes ``None``, in every
reader here (a collector reads NVML *after* its measurement, and must not lose it to a
GPU that fell off the bus); only a missing library or driver (``nvmlInit`` failing) is an
error, ``NvmlUnavailable``.
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

ENV_MODULE = "STEPSCOPE_NVML_MODULE"
SYSFS_ENV = "STEPSCOPE_SYSFS_ROOT"  # tests point it at a temp tree shaped like /sys

# nvmlGpuP2PCapsIndex_t order; the store's p2p_* columns use these names.
P2P_CAPS: tuple[tuple[str, str, int], ...] = (
    ("read", "NVML_P2P_CAPS_INDEX_READ", 0),
    ("write", "NVML_P2P_CAPS_INDEX_WRITE", 1),
    ("nvlink", "NVML_P2P_CAPS_INDEX_NVLINK", 2),
    ("atomics", "NVML_P2P_CAPS_INDEX_ATOMICS", 3),
)
# nvmlGpuP2PStatus_t -> the codes `nvidia-smi topo -p2p` prints (DIS is ours: no smi code).
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}
NVLINK_REMOTE = {0: "gpu", 1: "ibmnpu", 2: "switch", 0xFF: "unknown"}
# nvmlNvlinkVersion_t -> NVLink generation (6 = NVLink 4.0 on H100/H200, 7 = 5.0 on B200).
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
CPU_SET_WORDS = 16  # 64-bit words for nvmlDeviceGetCpuAffinity: room for 1024 CPUs


class NvmlUnavailable(Exception):
    """No usable NVML here (not installed, no driver, no NVIDIA GPU); message says which."""


@dataclass
class GpuInfo:
    index: int
    name: str
    uuid: str | None
    memory_bytes: int | None
    pci_bus_id: str
    mig_enabled: bool | None = None


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
class GpuDetail:
    """One GPU as the ``gpu`` collector records it; None = the GPU/driver cannot say."""

    index: int
    name: str
    uuid: str | None
    memory_bytes: int | None
    pci_bus_id: str
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
    mig_enabled: bool | None = None  # None: not MIG-capable
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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_module() -> ModuleType:
    name = os.environ.get(ENV_MODULE) or "pynvml"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise NvmlUnavailable(f"NVML bindings not installed ({name}: {exc})") from None


@contextmanager
def session() -> Iterator[ModuleType]:
    """nvmlInit/nvmlShutdown around a block; NvmlUnavailable when there is no NVIDIA GPU."""
    nvml = load_module()
    try:
        nvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses; message is what matters
        raise NvmlUnavailable(f"no NVIDIA driver or GPU on this host ({exc})") from None
    try:
        yield nvml
    finally:
        # Shutting down a half-initialised library must not mask the real result.
        with suppress(Exception):
            nvml.nvmlShutdown()


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
        fn = getattr(self.nvml, name, None)
        try:
            if fn is None:
                raise AttributeError(name)
            return fn(*args)
        except (self.error, AttributeError):
            if not quiet:
                self.unsupported[name] += 1
            return None


def cuda_version_text(nvml: ModuleType) -> str | None:
    raw = Reader(nvml)("nvmlSystemGetCudaDriverVersion_v2")
    if raw is None:
        return None
    raw = int(raw)
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def read_gpus(nvml: ModuleType) -> list[GpuInfo]:
    """The GPU list through ``Reader``: a GPU NVML cannot open is left out, a value it
    cannot read is None; nothing here raises ``NVMLError``."""
    from collectors.nvml_detail import read_mig

    read = Reader(nvml)
    gpus = []
    for index in range(int(read("nvmlDeviceGetCount") or 0)):
        handle = read("nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            continue
        pci, memory = read("nvmlDeviceGetPciInfo", handle), read("nvmlDeviceGetMemoryInfo", handle)
        uuid = read("nvmlDeviceGetUUID", handle)
        gpus.append(GpuInfo(
            index=index,
            name=_text(read("nvmlDeviceGetName", handle) or "unknown GPU"),
            uuid=None if uuid is None else _text(uuid),
            memory_bytes=None if memory is None else int(memory.total),
            pci_bus_id=_text(getattr(pci, "busId", "") or ""),
            mig_enabled=read_mig(read, handle)[0],
        ))  # fmt: skip
    return gpus


def inventory() -> GpuInventory:
    """Driver, CUDA driver version and the GPU list; NvmlUnavailable without NVIDIA GPUs."""
    with session() as nvml:
        driver = Reader(nvml)("nvmlSystemGetDriverVersion")
        return GpuInventory(
            driver_version="unknown" if driver is None else _text(driver),
            cuda_driver_version=cuda_version_text(nvml),
            gpus=read_gpus(nvml),
        )


def topology_inventory() -> Topology:
    """Everything the ``gpu`` collector records; NvmlUnavailable without NVIDIA GPUs."""
    with session() as nvml:
        return read_topology(nvml)


def read_topology(nvml: ModuleType) -> Topology:
    from collectors import gpu_topo
    from collectors.nvml_detail import read_detail

    read = Reader(nvml)
    driver = read("nvmlSystemGetDriverVersion")
    count = int(read("nvmlDeviceGetCount") or 0)
    # A GPU NVML cannot open (lost, or hidden by permissions) is left out, not fatal.
    opened = [(i, read("nvmlDeviceGetHandleByIndex", i)) for i in range(count)]
    handles = [h for _, h in opened if h is not None]
    gpus = [read_detail(read, i, h) for i, h in opened if h is not None]
    nv_counts = gpu_topo.nvlink_counts(gpus)
    topo: list[list[str | None]] = []
    p2p: dict[str, list[list[str | None]]] = {cap: [] for cap, _, _ in P2P_CAPS}
    caps = [(cap, const(nvml, name, default)) for cap, name, default in P2P_CAPS]
    for a, ha in enumerate(handles):
        row: list[str | None] = []
        for b, hb in enumerate(handles):
            level = None if a == b else read("nvmlDeviceGetTopologyCommonAncestor", ha, hb)
            row.append(gpu_topo.topology_label(a == b, level, nv_counts[a][b]))
        topo.append(row)
        for cap, index in caps:
            p2p[cap].append(
                [
                    "X" if a == b else _p2p(read("nvmlDeviceGetP2PStatus", ha, hb, index))
                    for b, hb in enumerate(handles)
                ]
            )
    return Topology(
        driver_version=None if driver is None else _text(driver),
        cuda_driver_version=cuda_version_text(nvml),
        gpus=gpus,
        topology=topo,
        p2p=p2p,
        unsupported=read.unsupported,
    )


def _p2p(status: Any) -> str | None:
    return None if status is None else P2P_STATUS.get(int(status), "U")


def mem_bandwidth_gbps(mem_clock_mhz: int | None, bus_width_bits: int | None) -> float | None:
    """Theoretical memory bandwidth in GB/s: clock x 2 (double data rate) x bus bytes.

    NVML's max memory clock is half the per-pin data rate for HBM2/HBM3 and GDDR6X/GDDR7 as
    it reports them (H100 SXM 2619 MHz x 2 x 5120 bit / 8 = 3352 GB/s, the 3.35 TB/s spec).
    """
    if not mem_clock_mhz or not bus_width_bits:
        return None
    return round(mem_clock_mhz * 1e6 * 2 * bus_width_bits / 8 / 1e9, 1)
