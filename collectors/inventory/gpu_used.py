"""Which GPUs a measurement used, and what their PCIe links did while it ran.

A host-wide label is wrong for a run on two of eight GPUs (two NVLink-bridged cards on a
mixed host are "nvlink", not "mixed"), and NVML indices are not CUDA ordinals: CUDA orders
devices fastest-first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and ``CUDA_VISIBLE_DEVICES``
renumbers them. So ranks report their device's UUID (``torch.cuda.get_device_properties(d)
.uuid``) and this module finds the NVML GPUs by UUID; ``visible_positions`` reads
``CUDA_VISIBLE_DEVICES`` only as a fallback.

PCIe links down-train at idle to save power, so ``nvmlDeviceGetCurrPcieLinkGeneration`` read
by the ``gpu`` collector often says Gen1 on a Gen5 card. ``PcieSampler`` polls it while the
GPU is busy and keeps the highest value seen (nvml.h: "current PCIe link generation";
``nvmlDeviceGetMaxPcieLinkGeneration`` is the most the GPU and system can do).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.inventory import nvml
from collectors.inventory.gpu_topo import interconnect_class


def bare_uuid(text: str | None) -> str | None:
    """``GPU-1f2e...``, ``MIG-...`` and torch's bare form compare equal after this."""
    if not text:
        return None
    return str(text).strip().lower().removeprefix("gpu-").removeprefix("mig-")


def positions_by_uuid(gpus: Sequence[Any], uuids: Sequence[str | None]) -> list[int] | None:
    """Positions in ``gpus`` (NVML order) of the ranks' devices; a MIG instance maps to its
    parent GPU (``mig_uuids``). None when any rank's device is not found."""
    index: dict[str, int] = {}
    for pos, g in enumerate(gpus):
        for u in [getattr(g, "uuid", None), *getattr(g, "mig_uuids", [])]:
            if (key := bare_uuid(u)) is not None:
                index[key] = pos
    found = [index.get(bare_uuid(u) or "") for u in uuids]
    if not found or any(p is None for p in found):
        return None
    return sorted(set(p for p in found if p is not None))


def visible_positions(value: str | None, gpus: Sequence[Any]) -> list[int] | None:
    """NVML positions named by ``CUDA_VISIBLE_DEVICES``, as CUDA reads it (torch 2.13
    torch/cuda/__init__.py ``_parse_visible_devices``): integers, or ``GPU-``/``MIG-`` UUID
    prefixes; the list stops at the first invalid entry. Integers are CUDA ordinals, equal
    to NVML indices only with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (or identical GPUs), so UUIDs
    are preferred. None when unset or unresolvable."""
    if value is None:
        return None
    out: list[int] = []
    for token in (t.strip() for t in value.split(",")):
        if token.isdigit():
            pos = int(token)
            if pos >= len(gpus):
                break
        elif token.lower().startswith(("gpu-", "mig-")):
            key = bare_uuid(token) or ""
            hits = [p for p, g in enumerate(gpus)
                    for u in [getattr(g, "uuid", None), *getattr(g, "mig_uuids", [])]
                    if (bare_uuid(u) or "").startswith(key)]  # fmt: skip
            if len(set(hits)) != 1:
                break  # unknown or ambiguous prefix: CUDA stops here too
            pos = hits[0]
        else:
            break
        if pos in out:
            return []  # a repeated id makes CUDA see no device at all
        out.append(pos)
    return out or None


@dataclass(frozen=True)
class UsedGpus:
    interconnect: str
    mig: bool  # a used GPU has MIG enabled


def used_interconnect(topo: nvml.Topology, positions: list[int]) -> UsedGpus:
    """Interconnect class of just these GPUs (the submatrix of ``topo -m``)."""
    sub = [[topo.topology[a][b] for b in positions] for a in positions]
    active = [topo.gpus[p].nvlink_active for p in positions]
    mig = any(topo.gpus[p].mig_enabled for p in positions)
    return UsedGpus(interconnect_class(sub, active), mig)


class PcieSampler:
    """Polls one GPU's current PCIe generation and width in a thread; keeps the maximum.

    Any NVML failure (no NVML, a MIG handle that cannot say, a lost GPU) just leaves the
    values None: a measurement never fails because of this side reading."""

    def __init__(self, uuid: str | None, interval_s: float = 0.02) -> None:
        self.uuid, self.interval_s = uuid, interval_s
        self.gen: int | None = None
        self.width: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self, read: nvml.Reader, handle: Any) -> None:
        gen = read("nvmlDeviceGetCurrPcieLinkGeneration", handle, quiet=True)
        width = read("nvmlDeviceGetCurrPcieLinkWidth", handle, quiet=True)
        if gen is not None:
            self.gen = max(int(gen), self.gen or 0)
        if width is not None:
            self.width = max(int(width), self.width or 0)

    def _loop(self) -> None:
        try:
            with nvml.session() as lib:
                read = nvml.Reader(lib)
                handle = read("nvmlDeviceGetHandleByUUID", f"GPU-{bare_uuid(self.uuid)}",
                              quiet=True)  # fmt: skip
                if handle is None:
                    return
                while True:
                    self.sample_once(read, handle)
                    if self._stop.wait(self.interval_s):
                        return
        except Exception:  # noqa: BLE001 - a side reading must never end the measurement
            return

    def __enter__(self) -> PcieSampler:
        if self.uuid:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
