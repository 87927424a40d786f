"""Pure topology arithmetic: interconnect class, NVLink counting, labels, CPU sets."""

from __future__ import annotations

import pytest

from collectors.inventory.gpu import interconnect_class
from collectors.inventory.gpu_topo import (
    cpu_ranges,
    normalize_bus_id,
    nvlink_counts,
    topology_label,
)
from collectors.inventory.nvml_types import GpuDetail, NvLink, mem_bandwidth_gbps


def _square(n: int, off: str) -> list[list[str]]:
    return [["X" if a == b else off for b in range(n)] for a in range(n)]


@pytest.mark.parametrize(
    ("topology", "nvlink_active", "expected"),
    [
        ([], None, "none"),
        (_square(8, "SYS"), None, "pcie-only"),
        (_square(8, "NV18"), None, "nvlink"),
        (_square(2, "PIX"), [0, 0], "pcie-only"),
        ([["X", "NV4", "PHB"], ["NV4", "X", "PHB"], ["PHB", "PHB", "X"]], None, "mixed"),
        # Unknown cells are not NVLink: one known NVLink pair and one unknown pair is mixed.
        ([["X", "NV2", None], ["NV2", "X", None], [None, None, "X"]], None, "mixed"),
        # NVLink seen from one side only still counts for the pair.
        ([["X", "NV1"], ["PIX", "X"]], None, "nvlink"),
        ([["X"]], [18], "nvlink"),
        ([["X"]], [0], "pcie-only"),
        ([["X"]], None, "pcie-only"),
    ],
)
def test_interconnect_class(topology, nvlink_active, expected) -> None:
    assert interconnect_class(topology, nvlink_active) == expected


def _gpu(index: int, bus: str, links: list[NvLink]) -> GpuDetail:
    return GpuDetail(index=index, name="g", uuid=None, memory_bytes=None, pci_bus_id=bus,
                     nvlinks=links)  # fmt: skip


def _link(remote: str | None, kind: str | None, active: bool = True) -> NvLink:
    return NvLink(link=0, active=active, version=4, remote_pci_bus_id=remote, remote_type=kind)


def test_nvlink_counts_direct_bridges_switches_and_unknown_remote_types() -> None:
    gpus = [
        # Bridge to GPU 1 written in the legacy bus-id form: still GPU 1.
        _gpu(0, "00000000:01:00.0", [_link("0000:02:00.0", "gpu")] * 2 + [_link(None, None, False)]),
        _gpu(1, "00000000:02:00.0", [_link("00000000:01:00.0", "gpu")] * 2),
        # Remote type unknown: a remote that is none of our GPUs is taken as a switch.
        _gpu(2, "00000000:03:00.0", [_link("00000000:FE:00.0", None)] * 3),
        _gpu(3, "00000000:04:00.0", [_link("00000000:FE:00.0", "switch")] * 5),
    ]  # fmt: skip
    counts = nvlink_counts(gpus)
    assert counts[0][1] == 2 and counts[1][0] == 2
    assert counts[2][3] == 3 and counts[3][2] == 3  # the smaller side of the switch pair
    assert counts[0][2] == 0 and counts[1][3] == 0
    assert topology_label(False, 50, counts[2][3]) == "NV3"
    assert topology_label(False, 40, 0) == "NODE"
    assert topology_label(False, None, 0) is None
    assert topology_label(True, None, 0) == "X"


def test_bus_ids_and_cpu_sets() -> None:
    assert normalize_bus_id("00000000:3A:00.0") == normalize_bus_id("0000:3a:00.0")
    assert normalize_bus_id("garbage") == "garbage" and normalize_bus_id(None) is None
    assert cpu_ranges([0xFFFF | (0xFFFF << 32)]) == "0-15,32-47"
    assert cpu_ranges([1, 1]) == "0,64"
    assert cpu_ranges([0, 0]) == ""


def test_theoretical_memory_bandwidth() -> None:
    assert mem_bandwidth_gbps(2619, 5120) == pytest.approx(3352.3)  # H100 SXM: 3.35 TB/s
    assert mem_bandwidth_gbps(12481, 512) == pytest.approx(1597.6)  # RTX PRO 6000 Server
    assert mem_bandwidth_gbps(None, 512) is None and mem_bandwidth_gbps(2619, 0) is None
