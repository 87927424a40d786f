"""The environment snapshot every run records: where it ran and with what.

Cheap by design: package versions come from installed metadata, so recording the torch or
vLLM version never imports them. NCCL and CUDA are read from torch only when the collector
has already imported it.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from typing import Any

from collectors.inventory import nvml
from store import __version__ as STEPSCOPE_VERSION


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _line(path: str, prefix: str) -> str | None:
    """The first line of a small system file that starts with ``prefix``."""
    try:
        return next((line for line in Path(path).read_text().splitlines()
                     if line.startswith(prefix)), None)  # fmt: skip
    except OSError:
        return None


def _os_name() -> str:
    line = _line("/etc/os-release", "PRETTY_NAME=")
    pretty = line.split("=", 1)[1].strip('"') if line else None
    # platform.platform() runs `uname -p` in a subprocess: only where os-release says nothing
    return f"{pretty or platform.platform()} (kernel {os.uname().release})"


def _cpu_model() -> str:
    line = _line("/proc/cpuinfo", "model name")
    return line.split(":", 1)[1].strip() if line else platform.processor() or platform.machine()


def _mem_bytes() -> int | None:
    fields = (_line("/proc/meminfo", "MemTotal:") or "").split()
    return int(fields[1]) * 1024 if len(fields) > 1 and fields[1].isdigit() else None


def _nccl_and_cuda() -> tuple[str | None, str | None]:
    """From torch if it is already imported (never import it just for this)."""
    torch = sys.modules.get("torch")
    nccl = cuda = None
    if torch is not None:
        cuda = getattr(torch.version, "cuda", None)
        with suppress(Exception):  # no usable CUDA/NCCL: the NCCL wheel's version, if any
            if torch.cuda.is_available():
                v = torch.cuda.nccl.version()
                nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    wheels = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
    return nccl or next((v for pkg in wheels if (v := package_version(pkg))), None), cuda


def snapshot() -> dict[str, Any]:
    """What the ``runs`` environment columns hold, plus GPUs when NVML is available.

    Never raises: collectors call it after measuring, so an NVML error (a lost GPU, no
    permission inside a container) becomes a note in ``env["nvml"]``, not a lost run."""
    nccl, cuda = _nccl_and_cuda()
    env: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "os": _os_name(),
        "cpu": _cpu_model(),
        "cpu_count": _cpu_count(),
        "mem_bytes": _mem_bytes(),
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "nccl": nccl,
        "cuda": cuda,
        "cuda_driver": None,
        "gpu_model": None,
        "gpu_count": 0,
        "vllm": package_version("vllm"),
        "stepscope_version": STEPSCOPE_VERSION,
        "gpus": [],
    }
    try:
        inv = nvml.inventory()
    except nvml.NvmlUnavailable as exc:
        env["nvml"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - taken after a measurement: never lose it to NVML
        env["nvml"] = f"NVML failed while reading the GPUs ({type(exc).__name__}: {exc})"
    else:
        env["driver_version"] = inv.driver_version
        env["cuda_driver"] = inv.cuda_driver_version
        env["gpu_count"] = len(inv.gpus)
        names = sorted({g.name for g in inv.gpus})
        env["gpu_model"] = " + ".join(names) if names else None
        env["gpus"] = [g.__dict__ for g in inv.gpus]
    return env


def _cpu_count() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
