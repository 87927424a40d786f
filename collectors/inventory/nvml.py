"""The one adapter between Stepscope and NVML (nvidia-ml-py's ``pynvml``); per-GPU reads live in
``collectors/inventory/nvml_detail.py``, the records and the ``Reader`` both use in
``collectors/inventory/nvml_types.py``.

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
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

from collectors.inventory import gpu_topo
from collectors.inventory.nvml_detail import identity, read_detail, read_mig
from collectors.inventory.nvml_types import GpuInfo, GpuInventory, Reader, Topology, const, text

ENV_MODULE = "STEPSCOPE_NVML_MODULE"

# nvmlGpuP2PCapsIndex_t order; the store's p2p_* columns use these names.
P2P_CAPS: tuple[tuple[str, str, int], ...] = (
    ("read", "NVML_P2P_CAPS_INDEX_READ", 0),
    ("write", "NVML_P2P_CAPS_INDEX_WRITE", 1),
    ("nvlink", "NVML_P2P_CAPS_INDEX_NVLINK", 2),
    ("atomics", "NVML_P2P_CAPS_INDEX_ATOMICS", 3),
)
# nvmlGpuP2PStatus_t -> the codes `nvidia-smi topo -p2p` prints (DIS is ours: no smi code).
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}


class NvmlUnavailable(Exception):
    """No usable NVML here (not installed, no driver, no NVIDIA GPU); message says which."""


@contextmanager
def session() -> Iterator[ModuleType]:
    """nvmlInit/nvmlShutdown around a block; NvmlUnavailable when there is no NVIDIA GPU."""
    name = os.environ.get(ENV_MODULE) or "pynvml"
    try:
        nvml = importlib.import_module(name)
    except ImportError as exc:
        raise NvmlUnavailable(f"NVML bindings not installed ({name}: {exc})") from None
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


def cuda_version_text(nvml: ModuleType) -> str | None:
    raw = Reader(nvml)("nvmlSystemGetCudaDriverVersion_v2")
    if raw is None:
        return None
    raw = int(raw)
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def read_gpus(nvml: ModuleType) -> list[GpuInfo]:
    """The GPU list through ``Reader``: a GPU NVML cannot open is left out, a value it
    cannot read is None; nothing here raises ``NVMLError``."""
    read = Reader(nvml)
    gpus = []
    for index in range(int(read("nvmlDeviceGetCount") or 0)):
        handle = read("nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            continue
        gpus.append(GpuInfo(**identity(read, index, handle), mig_enabled=read_mig(read, handle)[0]))
    return gpus


def inventory() -> GpuInventory:
    """Driver, CUDA driver version and the GPU list; NvmlUnavailable without NVIDIA GPUs."""
    with session() as nvml:
        driver = Reader(nvml)("nvmlSystemGetDriverVersion")
        return GpuInventory(
            driver_version="unknown" if driver is None else text(driver),
            cuda_driver_version=cuda_version_text(nvml),
            gpus=read_gpus(nvml),
        )


def topology_inventory() -> Topology:
    """Everything the ``gpu`` collector records; NvmlUnavailable without NVIDIA GPUs."""
    with session() as nvml:
        return read_topology(nvml)


def read_topology(nvml: ModuleType) -> Topology:
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
        driver_version=None if driver is None else text(driver),
        cuda_driver_version=cuda_version_text(nvml),
        gpus=gpus,
        topology=topo,
        p2p=p2p,
        unsupported=read.unsupported,
    )


def _p2p(status: Any) -> str | None:
    return None if status is None else P2P_STATUS.get(int(status), "U")
