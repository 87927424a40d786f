"""Pure topology arithmetic for the ``gpu`` collector: no NVML, no I/O, cheap to import.

``interconnect_class`` is the one classification the planner and the comm benchmark use.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any, Literal

InterconnectClass = Literal["pcie-only", "nvlink", "mixed", "none"]

# nvmlGpuTopologyLevel_t -> `nvidia-smi topo -m` labels. INTERNAL (two GPUs on one board)
# sits one bridge apart, which smi also shows as PIX.
TOPOLOGY_LABELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

def is_nvlink(label: str | None) -> bool:
    return bool(label) and str(label).startswith("NV")


def interconnect_class(
    topology: Sequence[Sequence[str | None]], nvlink_active: Sequence[int] | None = None
) -> InterconnectClass:
    """Classify a host's GPU interconnect from its ``nvidia-smi topo -m`` style matrix.

    ``topology[a][b]`` holds labels such as ``"X"``, ``"NV18"``, ``"PIX"``, ``"SYS"`` or None
    (unknown). With two or more GPUs: ``"nvlink"`` when every GPU pair has NVLink (directly
    or through NVSwitch), ``"pcie-only"`` when no pair has, ``"mixed"`` otherwise (e.g.
    NVLink bridges between pairs of PCIe cards). No GPU: ``"none"``. One GPU has no pairs:
    ``"nvlink"`` if its own NVLinks are active (``nvlink_active[0] > 0``), else
    ``"pcie-only"``.
    """
    n = len(topology)
    if n == 0:
        return "none"
    if n == 1:
        return "nvlink" if nvlink_active and (nvlink_active[0] or 0) > 0 else "pcie-only"
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    nv = sum(1 for a, b in pairs if is_nvlink(topology[a][b]) or is_nvlink(topology[b][a]))
    if nv == 0:
        return "pcie-only"
    return "nvlink" if nv == len(pairs) else "mixed"


def topology_label(same: bool, level: int | None, nvlinks: int) -> str | None:
    """One cell of ``nvidia-smi topo -m``: NVLink beats the PCIe path when there is one."""
    if same:
        return "X"
    if nvlinks > 0:
        return f"NV{nvlinks}"
    return None if level is None else TOPOLOGY_LABELS.get(int(level))


def normalize_bus_id(bus_id: str | None) -> str | None:
    """``00000000:18:00.0`` and ``0000:18:00.0`` are the same device: ``0000:18:00.0``."""
    if not bus_id:
        return None
    text = bus_id.strip().lower()
    try:
        domain, bus, devfn = text.split(":")
        dev, fn = devfn.split(".")
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{int(fn, 16)}"
    except ValueError:
        return text


def nvlink_counts(gpus: Sequence[Any]) -> list[list[int]]:
    """Active NVLinks between each pair of GPUs, by position in ``gpus``.

    Each GPU has ``pci_bus_id`` and ``nvlinks`` (``active``, ``remote_pci_bus_id``,
    ``remote_type``). A link to another GPU counts for that pair; links to NVSwitch join a
    GPU to every other switch-attached GPU, and a pair gets the smaller of their switch link
    counts (HGX H100: 18 links each, NV18 everywhere, as nvidia-smi shows it). When NVML
    cannot name the remote type, a remote that is not one of our GPUs is taken as a switch.
    """
    n = len(gpus)
    by_bus = {normalize_bus_id(g.pci_bus_id): pos for pos, g in enumerate(gpus)}
    counts = [[0] * n for _ in range(n)]
    switch = [0] * n
    for pos, gpu in enumerate(gpus):
        for link in gpu.nvlinks:
            if not link.active:
                continue
            peer = by_bus.get(normalize_bus_id(link.remote_pci_bus_id))
            kind = link.remote_type
            if kind == "gpu" or (kind in (None, "unknown") and peer is not None):
                if peer is not None and peer != pos:
                    counts[pos][peer] += 1
            elif kind == "switch" or kind in (None, "unknown"):
                switch[pos] += 1
    for a in range(n):
        for b in range(n):
            if a != b and switch[a] and switch[b]:
                counts[a][b] += min(switch[a], switch[b])
    return counts


def cpu_ranges(masks: Sequence[int]) -> str:
    """CPU set from NVML's 64-bit affinity words as nvidia-smi prints it: ``0-15,32-47``."""
    cpus = [
        w * 64 + bit for w, mask in enumerate(masks) for bit in range(64) if int(mask) >> bit & 1
    ]
    ranges = []
    # CPUs of one consecutive run share ``cpu - position`` (the itertools.groupby recipe)
    for _, group in groupby(enumerate(cpus), key=lambda pos_cpu: pos_cpu[1] - pos_cpu[0]):
        run = [cpu for _, cpu in group]
        ranges.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ",".join(ranges)
