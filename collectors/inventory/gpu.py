"""``gpu``: the NVML inventory - GPUs, PCIe/NVLink, P2P and topology matrices - and the
host's interconnect class. It only reads NVML, so it takes no measurement lock.

Without NVML (no driver, no NVIDIA GPU) it still records a run saying so (interconnect
``none``) and exits 0. ``interconnect_class`` (re-exported from ``collectors.inventory.gpu_topo``) and
``host_interconnect`` are the entry points other collectors and the planner use.
"""

from __future__ import annotations

import argparse
from typing import Any

from collectors.inventory import nvml
from collectors.inventory.gpu_topo import InterconnectClass, interconnect_class

__all__ = ["host_interconnect", "interconnect_class", "run", "tables_for"]


def host_interconnect() -> InterconnectClass:
    """This host's interconnect class read live from NVML; ``"none"`` without NVML."""
    try:
        topo = nvml.topology_inventory()
    except nvml.NvmlUnavailable:
        return "none"
    return interconnect_class(topo.topology, [g.nvlink_active for g in topo.gpus])


def gpu_model(names: list[str]) -> str | None:
    unique = sorted(set(names))
    return " + ".join(unique) if unique else None


def describe(topo: nvml.Topology, klass: str) -> str:
    """One line for the log: '8x NVIDIA H100 80GB HBM3, nvlink (NVLink on 28 of 28 pairs)'."""
    n = len(topo.gpus)
    model = gpu_model([g.name for g in topo.gpus]) or "GPU"
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    nv = sum(1 for a, b in pairs if str(topo.topology[a][b] or "").startswith("NV"))
    return f"{n}x {model}, {klass}" + (f" (NVLink on {nv} of {len(pairs)} pairs)" if pairs else "")


def mig_note(gpus: list[Any]) -> str | None:
    """MIG splits a GPU into instances: NVML lists the parent, CUDA (and so comm and
    profile) sees one instance per process. Say so wherever it is on."""
    on = [g for g in gpus if getattr(g, "mig_enabled", None)]
    if not on:
        return None
    counts = [getattr(g, "mig_uuids", None) for g in on]
    which = ", ".join(f"GPU {g.index}" + (f" ({len(c)} instance(s))" if c is not None else "")
                      for g, c in zip(on, counts, strict=True))  # fmt: skip
    return (f"MIG is enabled on {which}: CUDA sees MIG instances, not these GPUs, and NVML's "
            "figures (memory, links, topology) describe the whole GPU")


def _unsupported_note(topo: nvml.Topology) -> str | None:
    notes = [mig_note(topo.gpus)]
    if topo.unsupported:
        calls = ", ".join(f"{name} ({count})" for name, count in sorted(topo.unsupported.items()))
        notes.append(f"NVML could not report some values (stored as NULL): {calls}")
    return "; ".join(n for n in notes if n) or None


def tables_for(topo: nvml.Topology) -> tuple[dict[str, Any], str]:
    """The bundle tables for an NVML inventory, and its interconnect class."""
    klass = interconnect_class(topo.topology, [g.nvlink_active for g in topo.gpus])
    devices = [
        {
            "gpu_index": g.index, "name": g.name, "uuid": g.uuid,
            "memory_bytes": g.memory_bytes, "pci_bus_id": g.pci_bus_id,
            "pcie_gen_current": g.pcie_gen_current, "pcie_gen_max": g.pcie_gen_max,
            "pcie_width_current": g.pcie_width_current, "pcie_width_max": g.pcie_width_max,
            "nvlink_active": g.nvlink_active, "power_limit_w": g.power_limit_w,
            "sm_clock_max_mhz": g.sm_clock_max_mhz, "mem_clock_max_mhz": g.mem_clock_max_mhz,
            "mem_bus_width_bits": g.mem_bus_width_bits,
            "mem_bandwidth_gbps": g.mem_bandwidth_gbps, "numa_node": g.numa_node,
            "cpu_affinity": g.cpu_affinity, "mig_enabled": g.mig_enabled,
            "mig_devices": len(g.mig_uuids) if g.mig_enabled else None,
        }
        for g in topo.gpus
    ]  # fmt: skip
    links = [
        {
            "gpu_a": ga.index, "gpu_b": gb.index, "topology": topo.topology[a][b],
            **{f"p2p_{cap}": topo.p2p[cap][a][b] for cap, _, _ in nvml.P2P_CAPS},
        }
        for a, ga in enumerate(topo.gpus)
        for b, gb in enumerate(topo.gpus)
    ]  # fmt: skip
    nvlinks = [
        {
            "gpu_index": g.index, "link": link.link, "active": link.active,
            "version": link.version, "remote_pci_bus_id": link.remote_pci_bus_id,
            "remote_device_type": link.remote_type,
        }
        for g in topo.gpus
        for link in g.nvlinks
    ]  # fmt: skip
    host = {
        "nvml_available": [True], "driver_version": [topo.driver_version],
        "cuda_driver_version": [topo.cuda_driver_version], "gpu_count": [len(topo.gpus)],
        "gpu_model": [gpu_model([g.name for g in topo.gpus])],
        "interconnect_class": [klass], "message": [_unsupported_note(topo)],
    }  # fmt: skip
    tables: dict[str, Any] = {"gpu_host": host}
    # Empty tables are left out: a list of no rows has no column types to write.
    for name, rows in (("gpu_devices", devices), ("gpu_links", links), ("gpu_nvlinks", nvlinks)):
        if rows:
            tables[name] = rows
    return tables, klass


def run(args: argparse.Namespace, ctx: Any) -> int:
    from store.spool.bundle import Bundle, new_run_id

    run_id = new_run_id("gpu")
    try:
        topo = nvml.topology_inventory()
    except nvml.NvmlUnavailable as exc:
        text = str(exc)
        note = text if text.startswith("no NVIDIA") else f"no NVIDIA GPU found: {text}"
        ctx.log.warning(f"{note}; recording interconnect 'none'")
        # An empty inventory: its host row alone (interconnect "none"), saying why.
        topo = nvml.Topology(None, None, gpus=[], topology=[], p2p={})
        tables, klass = tables_for(topo)
        tables["gpu_host"].update(nvml_available=[False], message=[note])
    else:
        tables, klass = tables_for(topo)
        note = tables["gpu_host"]["message"][0]
        ctx.log.info(describe(topo, klass))
        if note:
            ctx.log.warning(note)
    record = ctx.run_record(run_id, message=note)
    summary = {
        "gpu_count": len(topo.gpus),
        "gpu_model": tables["gpu_host"]["gpu_model"][0],
        "interconnect": klass,
        "driver": topo.driver_version,
    }
    return ctx.submit(Bundle(record, tables), summary)
