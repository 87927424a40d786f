"""The one adapter between Stepscope and NVML (nvidia-ml-py's ``pynvml``).

Everything that asks the GPUs about themselves goes through here. ``STEPSCOPE_NVML_MODULE``
names a module with pynvml's API to use instead; tests on machines without a GPU point it
at a stand-in (the hardware boundary is the only place one is allowed).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

ENV_MODULE = "STEPSCOPE_NVML_MODULE"


class NvmlUnavailable(Exception):
    """No usable NVML here (not installed, no driver, no NVIDIA GPU); message says which."""


@dataclass
class GpuInfo:
    index: int
    name: str
    uuid: str
    memory_bytes: int
    pci_bus_id: str


@dataclass
class GpuInventory:
    driver_version: str
    cuda_driver_version: str  # e.g. "12.8", from nvmlSystemGetCudaDriverVersion
    gpus: list[GpuInfo] = field(default_factory=list)


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


def cuda_version_text(nvml: ModuleType) -> str:
    raw = int(nvml.nvmlSystemGetCudaDriverVersion_v2())
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def read_gpus(nvml: ModuleType) -> list[GpuInfo]:
    gpus = []
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        pci = nvml.nvmlDeviceGetPciInfo(handle)
        gpus.append(
            GpuInfo(
                index=index,
                name=_text(nvml.nvmlDeviceGetName(handle)),
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                pci_bus_id=_text(getattr(pci, "busId", "")),
            )
        )
    return gpus


def inventory() -> GpuInventory:
    """Driver, CUDA driver version and the GPU list; NvmlUnavailable without NVIDIA GPUs."""
    with session() as nvml:
        return GpuInventory(
            driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
            cuda_driver_version=cuda_version_text(nvml),
            gpus=read_gpus(nvml),
        )
