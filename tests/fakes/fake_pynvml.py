"""A stand-in for nvidia-ml-py's ``pynvml`` on machines without an NVIDIA GPU.

The only stand-in Stepscope allows, at the hardware boundary. Select it with
``STEPSCOPE_NVML_MODULE=tests.fakes.fake_pynvml`` and describe the machine in a JSON file
named by ``STEPSCOPE_FAKE_NVML_SPEC`` (see ``tests/fakes/nvml_*.json``). It answers with
pynvml's function names, constants and error class, and like the real library raises
``NVMLError`` (NotSupported, InvalidArgument, LibraryNotFound, ...) where a GPU cannot answer.

Spec keys: ``driver_version``, ``cuda_driver_version`` (int, 13000 = 13.0), ``gpu_count``,
``gpu`` (fields every GPU shares), ``gpus`` (per-GPU overrides, by position),
``p2p`` ({read|write|nvlink|atomics: status}; status ``"nvlink"`` = OK where the pair has
NVLink else NS), ``p2p_pairs`` (overrides: {a, b, cap, status}), ``not_supported``
(functions that raise NotSupported for every GPU), ``init_error`` (an NVML_ERROR_ name),
``errors`` ({function: NVML_ERROR_ name}: that call fails with that error after a good
``nvmlInit``, e.g. a GPU lost mid-run or no permission in a container).
GPU fields: name, uuid, memory_mib, pci_bus_id, pcie {gen_current, gen_max, width_current,
width_max}, power_limit_w, sm_clock_max_mhz, mem_clock_max_mhz, mem_bus_width_bits,
numa_node, cpus ("0-15,32-47"), pcie_switch, host_bridge (topology: same switch = PIX, same
host bridge = PHB, same NUMA node = NODE, else SYS), nvlink {peers {gpu: links},
switch_links, inactive_links, version (nvmlNvlinkVersion_t)}, not_supported, errors,
gpu_numa_id (what nvmlDeviceGetNumaNodeId answers: only where GPUs are NUMA nodes, so
NotSupported when absent, as on x86 PCIe hosts; ``numa_node`` is the sysfs value the
tests write under ``STEPSCOPE_SYSFS_ROOT``), pcie.gen_current may be a list (successive
reads: idle, then trained up under load), mig {mode, pending, instances} (instances:
``MIG-`` UUIDs, or a count) with ``max_mig`` slots (default 7).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SPEC_ENV = "STEPSCOPE_FAKE_NVML_SPEC"

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_NVLINK_MAX_LINKS = 36  # as nvidia-ml-py 13.x defines it
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50
# Copied as nvidia-ml-py 13.x writes it: READ is the tuple (0,), a stray comma upstream.
NVML_P2P_CAPS_INDEX_READ = (0,)
NVML_P2P_CAPS_INDEX_WRITE = 1
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_CAPS_INDEX_ATOMICS = 3
NVML_P2P_STATUS_OK = 0
NVML_P2P_STATUS_NOT_SUPPORTED = 5
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_ERROR_NOT_FOUND = 6

_P2P_CODES = {"OK": 0, "CNS": 1, "GNS": 2, "TNS": 3, "DIS": 4, "NS": 5, "U": 6}
_CAPS = {0: "read", 1: "write", 2: "nvlink", 3: "atomics"}
_NAMES = {v: k for k, v in globals().items() if k.startswith("NVML_ERROR_")}


class NVMLError(Exception):
    """pynvml's error: ``value`` is the nvmlReturn_t code."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _NAMES.get(self.value, f"NVML error {self.value}").replace("NVML_ERROR_", "")


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
    def __init__(self, value: int = NVML_ERROR_NOT_SUPPORTED) -> None:
        super().__init__(value)


_state: dict[str, Any] = {"spec": None, "gpus": []}


def _spec() -> dict[str, Any]:
    if _state["spec"] is None:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    return _state["spec"]


def _gpu(handle: Any) -> dict[str, Any]:
    _spec()
    if not isinstance(handle, SimpleNamespace) or not hasattr(handle, "fake_index"):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _state["gpus"][handle.fake_index]


def _fail(fn: str, gpu: dict[str, Any] | None = None) -> None:
    """Raise the error the spec's ``errors`` names for ``fn`` (spec-wide or this GPU's)."""
    name = (_spec().get("errors") or {}).get(fn) or ((gpu or {}).get("errors") or {}).get(fn)
    if name:
        raise NVMLError(globals()[f"NVML_ERROR_{name}"])


def _check(handle: Any, fn: str) -> dict[str, Any]:
    gpu = _gpu(handle)
    _fail(fn, gpu)
    if fn in _spec().get("not_supported", []) or fn in gpu.get("not_supported", []):
        raise NVMLError_NotSupported()
    return gpu


def _value(handle: Any, fn: str, key: str) -> Any:
    gpu = _check(handle, fn)
    value = gpu.get(key)
    if value is None:
        raise NVMLError_NotSupported()
    return value


def nvmlInit() -> None:
    path = os.environ.get(SPEC_ENV)
    if not path:
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
    spec = json.loads(Path(path).read_text())
    if spec.get("init_error"):
        raise NVMLError(globals()[f"NVML_ERROR_{spec['init_error']}"])
    base = spec.get("gpu", {})
    overrides = spec.get("gpus", [])
    count = int(spec.get("gpu_count", len(overrides)))
    gpus = []
    for i in range(count):
        gpu = {**base, **(overrides[i] if i < len(overrides) else {})}
        gpu.setdefault("uuid", f"GPU-fa4e0000-0000-4000-8000-{i:012x}")
        gpu.setdefault("pci_bus_id", f"00000000:{0x18 + 0x10 * i:02X}:00.0")
        gpus.append(gpu)
    _state.update(spec=spec, gpus=gpus)


def nvmlShutdown() -> None:
    _state.update(spec=None, gpus=[])


def nvmlSystemGetDriverVersion() -> str:
    _fail("nvmlSystemGetDriverVersion")
    return str(_spec()["driver_version"])


def nvmlSystemGetCudaDriverVersion_v2() -> int:  # noqa: N802
    if "nvmlSystemGetCudaDriverVersion_v2" in _spec().get("not_supported", []):
        raise NVMLError_NotSupported()
    return int(_spec()["cuda_driver_version"])


nvmlSystemGetCudaDriverVersion = nvmlSystemGetCudaDriverVersion_v2


def nvmlDeviceGetCount() -> int:
    _fail("nvmlDeviceGetCount")
    return len(_state["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> SimpleNamespace:
    if not 0 <= int(index) < nvmlDeviceGetCount():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if "nvmlDeviceGetHandleByIndex" in _state["gpus"][index].get("not_supported", []):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    _fail("nvmlDeviceGetHandleByIndex", _state["gpus"][index])
    return SimpleNamespace(fake_index=int(index))


def _mig_uuids(gpu: dict[str, Any]) -> list[str]:
    mig = gpu.get("mig") or {}
    inst = mig.get("instances", [])
    if isinstance(inst, int):
        inst = [f"MIG-{i:08x}-1111-4000-8000-{gpu['uuid'][-12:]}" for i in range(inst)]
    return list(inst) if mig.get("mode") else []


def nvmlDeviceGetHandleByUUID(uuid: Any) -> SimpleNamespace:
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    for i, gpu in enumerate(_state["gpus"]):
        if gpu["uuid"] == text:
            return nvmlDeviceGetHandleByIndex(i)
        if text in _mig_uuids(gpu):
            return SimpleNamespace(fake_index=i, mig=text)
    _spec()
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetMigMode(handle: Any) -> list[int]:
    gpu = _check(handle, "nvmlDeviceGetMigMode")
    mig = gpu.get("mig")
    if mig is None:
        raise NVMLError_NotSupported()  # not a MIG-capable GPU
    return [int(bool(mig.get("mode"))), int(bool(mig.get("pending", mig.get("mode"))))]


def nvmlDeviceGetMaxMigDeviceCount(handle: Any) -> int:
    gpu = _check(handle, "nvmlDeviceGetMaxMigDeviceCount")
    if gpu.get("mig") is None:
        raise NVMLError_NotSupported()
    return int(gpu.get("max_mig", 7))


def nvmlDeviceGetMigDeviceHandleByIndex(handle: Any, index: int) -> SimpleNamespace:
    uuids = _mig_uuids(_check(handle, "nvmlDeviceGetMigDeviceHandleByIndex"))
    if not 0 <= int(index) < len(uuids):
        raise NVMLError(NVML_ERROR_NOT_FOUND)  # an empty slot, as real NVML answers
    return SimpleNamespace(fake_index=handle.fake_index, mig=uuids[int(index)])


def nvmlDeviceGetName(handle: Any) -> str:
    return _value(handle, "nvmlDeviceGetName", "name")


def nvmlDeviceGetUUID(handle: Any) -> str:
    if getattr(handle, "mig", None):
        _check(handle, "nvmlDeviceGetUUID")
        return handle.mig
    return _value(handle, "nvmlDeviceGetUUID", "uuid")


def nvmlDeviceGetMemoryInfo(handle: Any, version: Any = None) -> SimpleNamespace:
    total = int(_value(handle, "nvmlDeviceGetMemoryInfo", "memory_mib")) * 1024 * 1024
    return SimpleNamespace(total=total, free=total, used=0)


def nvmlDeviceGetPciInfo(handle: Any) -> SimpleNamespace:
    bus = _value(handle, "nvmlDeviceGetPciInfo", "pci_bus_id")
    return SimpleNamespace(busId=bus, busIdLegacy=bus[4:])


def _pcie(handle: Any, fn: str, key: str) -> int:
    gpu = _check(handle, fn)
    value = gpu.get("pcie", {}).get(key)
    if isinstance(value, list):  # successive reads: the link trains up once the GPU is busy
        reads = gpu.setdefault("_reads", {})
        n = reads[key] = reads.get(key, -1) + 1
        value = value[min(n, len(value) - 1)]
    if value is None:
        raise NVMLError_NotSupported()
    return int(value)


def nvmlDeviceGetCurrPcieLinkGeneration(handle: Any) -> int:
    return _pcie(handle, "nvmlDeviceGetCurrPcieLinkGeneration", "gen_current")


def nvmlDeviceGetMaxPcieLinkGeneration(handle: Any) -> int:
    return _pcie(handle, "nvmlDeviceGetMaxPcieLinkGeneration", "gen_max")


def nvmlDeviceGetCurrPcieLinkWidth(handle: Any) -> int:
    return _pcie(handle, "nvmlDeviceGetCurrPcieLinkWidth", "width_current")


def nvmlDeviceGetMaxPcieLinkWidth(handle: Any) -> int:
    return _pcie(handle, "nvmlDeviceGetMaxPcieLinkWidth", "width_max")


def nvmlDeviceGetEnforcedPowerLimit(handle: Any) -> int:
    return int(_value(handle, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_w") * 1000)


def nvmlDeviceGetPowerManagementLimit(handle: Any) -> int:
    return int(_value(handle, "nvmlDeviceGetPowerManagementLimit", "power_limit_w") * 1000)


def nvmlDeviceGetMaxClockInfo(handle: Any, clock: int) -> int:
    key = {NVML_CLOCK_SM: "sm_clock_max_mhz", NVML_CLOCK_MEM: "mem_clock_max_mhz"}.get(clock)
    if key is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return int(_value(handle, "nvmlDeviceGetMaxClockInfo", key))


def nvmlDeviceGetMemoryBusWidth(handle: Any) -> int:
    return int(_value(handle, "nvmlDeviceGetMemoryBusWidth", "mem_bus_width_bits"))


def nvmlDeviceGetNumaNodeId(handle: Any) -> int:
    """Only where GPUs are NUMA nodes (nvml.h); NotSupported on x86 PCIe hosts."""
    return int(_value(handle, "nvmlDeviceGetNumaNodeId", "gpu_numa_id"))


def nvmlDeviceGetCpuAffinity(handle: Any, cpu_set_size: int) -> list[int]:
    words = [0] * int(cpu_set_size)
    for part in str(_value(handle, "nvmlDeviceGetCpuAffinity", "cpus")).split(","):
        lo, _, hi = part.partition("-")
        for cpu in range(int(lo), int(hi or lo) + 1):
            if cpu < 64 * len(words):  # NVML truncates to the buffer it is given
                words[cpu // 64] |= 1 << (cpu % 64)
    return words


def _links(handle: Any) -> list[dict[str, Any]]:
    """The GPU's NVLinks in link order: peer links, then switch links, then inactive ones."""
    nv = _gpu(handle).get("nvlink") or {}
    links = []
    for peer, count in (nv.get("peers") or {}).items():
        bus = _state["gpus"][int(peer)]["pci_bus_id"]
        links += [{"active": 1, "remote": bus, "type": NVML_NVLINK_DEVICE_TYPE_GPU}] * int(count)
    switch = {"active": 1, "remote": "00000000:FE:00.0", "type": NVML_NVLINK_DEVICE_TYPE_SWITCH}
    links += [switch] * int(nv.get("switch_links", 0))
    links += [{"active": 0, "remote": None, "type": None}] * int(nv.get("inactive_links", 0))
    return links


def _link(handle: Any, fn: str, link: int) -> dict[str, Any]:
    _check(handle, fn)
    links = _links(handle)
    if not links:
        raise NVMLError_NotSupported()  # a GPU without NVLink, as real NVML answers
    if not 0 <= int(link) < len(links):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return links[int(link)]


def nvmlDeviceGetNvLinkState(handle: Any, link: int) -> int:
    return int(_link(handle, "nvmlDeviceGetNvLinkState", link)["active"])


def nvmlDeviceGetNvLinkVersion(handle: Any, link: int) -> int:
    _link(handle, "nvmlDeviceGetNvLinkVersion", link)
    return int((_gpu(handle).get("nvlink") or {}).get("version", 6))


def nvmlDeviceGetNvLinkRemotePciInfo(handle: Any, link: int) -> SimpleNamespace:
    info = _link(handle, "nvmlDeviceGetNvLinkRemotePciInfo", link)
    if not info["active"]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return SimpleNamespace(busId=info["remote"])


def nvmlDeviceGetNvLinkRemoteDeviceType(handle: Any, link: int) -> int:
    info = _link(handle, "nvmlDeviceGetNvLinkRemoteDeviceType", link)
    if not info["active"]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return int(info["type"])


def _nvlinked(a: int, b: int) -> bool:
    nv = [_state["gpus"][i].get("nvlink") or {} for i in (a, b)]
    switched = all(side.get("switch_links") for side in nv)
    return str(b) in (nv[0].get("peers") or {}) or switched


def nvmlDeviceGetTopologyCommonAncestor(device1: Any, device2: Any) -> int:
    a = _check(device1, "nvmlDeviceGetTopologyCommonAncestor")
    b = _check(device2, "nvmlDeviceGetTopologyCommonAncestor")
    if device1.fake_index == device2.fake_index:
        return NVML_TOPOLOGY_INTERNAL
    for key, level in (("pcie_switch", NVML_TOPOLOGY_SINGLE),
                       ("host_bridge", NVML_TOPOLOGY_HOSTBRIDGE),
                       ("numa_node", NVML_TOPOLOGY_NODE)):  # fmt: skip
        if a.get(key) is not None and a.get(key) == b.get(key):
            return level
    return NVML_TOPOLOGY_SYSTEM


def nvmlDeviceGetP2PStatus(device1: Any, device2: Any, p2p_index: int) -> int:
    if not isinstance(p2p_index, int):  # ctypes would refuse it too ("Don't know how to convert")
        raise TypeError(f"p2pIndex must be an int, got {p2p_index!r}")
    _check(device1, "nvmlDeviceGetP2PStatus")
    _check(device2, "nvmlDeviceGetP2PStatus")
    cap = _CAPS.get(p2p_index)
    if cap is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    a, b = device1.fake_index, device2.fake_index
    for pair in _spec().get("p2p_pairs", []):
        if {pair["a"], pair["b"]} == {a, b} and pair["cap"] == cap:
            return _P2P_CODES[pair["status"]]
    status = (_spec().get("p2p") or {}).get(cap, "NS")
    if status == "nvlink":
        status = "OK" if _nvlinked(a, b) else "NS"
    return _P2P_CODES[status]
