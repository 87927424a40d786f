"""Hardware specs: GPU count, memory size and bandwidth, interconnect class.

From presets (REFERENCE §5 and vendor spec sheets) or from a host's stored ``gpu`` run,
which the page / CLI reads through ``store.queries_planner`` and passes in as plain rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from planner.errors import PlannerInputError

GB = 1e9


@dataclass(frozen=True)
class HardwareSpec:
    name: str
    gpu_model: str
    gpu_count: int
    memory_bytes: float  # per GPU
    mem_bandwidth_gbps: float  # per GPU, GB/s (1e9), theoretical
    interconnect: str  # "pcie" | "nvlink"
    link_gbps: float  # GPU-GPU bandwidth per direction, GB/s
    bf16_tflops: float  # dense tensor throughput (spec sheet, approximate)
    fp8_tflops: float
    source: str = ""

    def tflops(self, dtype: str) -> float:
        return self.fp8_tflops if dtype.startswith(("fp8", "int8")) else self.bf16_tflops


@dataclass(frozen=True)
class _Gpu:
    match: str
    memory_bytes: float
    mem_bandwidth_gbps: float
    interconnect: str
    link_gbps: float
    bf16_tflops: float
    fp8_tflops: float
    source: str


# Known GPU models: fills what a stored `gpu` run could not report (NVML NotSupported).
_GPUS: tuple[_Gpu, ...] = (
    _Gpu("RTX PRO 6000", 96 * GB, 1792, "pcie", 55, 500, 1000,
         "RTX PRO 6000 Blackwell Workstation: 96 GB GDDR7, 1.792 TB/s, PCIe Gen5 x16 "
         "(53-56 GB/s measured P2P) [REFERENCE §5]"),
    _Gpu("H200", 141 * GB, 4800, "nvlink", 450, 989, 1979,
         "H200 SXM: 141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s bidirectional [REFERENCE §5]"),
    _Gpu("H100", 80 * GB, 3350, "nvlink", 450, 989, 1979,
         "H100 SXM: 80 GB HBM3, 3.35 TB/s, NVLink 900 GB/s bidirectional [spec sheet]"),
)  # fmt: skip


def _preset(name: str, gpu: str, count: int = 8) -> HardwareSpec:
    g = next(x for x in _GPUS if x.match == gpu)
    return HardwareSpec(
        name=name, gpu_model=f"NVIDIA {gpu}", gpu_count=count, memory_bytes=g.memory_bytes,
        mem_bandwidth_gbps=g.mem_bandwidth_gbps, interconnect=g.interconnect,
        link_gbps=g.link_gbps, bf16_tflops=g.bf16_tflops, fp8_tflops=g.fp8_tflops,
        source=f"preset {name}: {g.source}",
    )  # fmt: skip


HARDWARE_PRESETS: dict[str, HardwareSpec] = {
    "rtx-pro-6000-pcie-8x": _preset("rtx-pro-6000-pcie-8x", "RTX PRO 6000"),
    "h100-sxm-8x": _preset("h100-sxm-8x", "H100"),
    "h200-sxm-8x": _preset("h200-sxm-8x", "H200"),
}


def preset(name: str) -> HardwareSpec:
    if name not in HARDWARE_PRESETS:
        raise PlannerInputError(
            f"host preset {name!r} unknown (known: {', '.join(HARDWARE_PRESETS)})"
        )
    return HARDWARE_PRESETS[name]


def _known(gpu_model: str) -> _Gpu | None:
    low = (gpu_model or "").lower()
    return next((g for g in _GPUS if g.match.lower() in low), None)


def from_gpu_run(host: dict[str, Any], devices: list[dict[str, Any]]) -> HardwareSpec:
    """A HardwareSpec from one stored ``gpu`` run: a ``v_gpu_host`` row and its devices.

    Memory bandwidth / FLOPs the run lacks come from the known-model table (said in source).
    """
    name = str(host.get("host") or "host")
    run_id = str(host.get("run_id") or "?")
    count = int(host.get("gpu_count") or 0)
    if count <= 0 or not devices:
        raise PlannerInputError(
            f"host {name!r}: no GPUs recorded in gpu run {run_id} "
            "(run `python -m collectors gpu` on a machine with GPUs)"
        )
    model = str(host.get("gpu_model") or devices[0].get("name") or "")
    known = _known(model)
    mems = [float(d["memory_bytes"]) for d in devices if _num(d.get("memory_bytes"))]
    bws = [float(d["mem_bandwidth_gbps"]) for d in devices if _num(d.get("mem_bandwidth_gbps"))]
    filled: list[str] = []
    if mems:
        memory = min(mems)
    elif known:
        memory, _ = known.memory_bytes, filled.append("memory size")
    else:
        raise PlannerInputError(f"host {name!r}: GPU memory size not recorded for {model!r}")
    if bws:
        bandwidth = min(bws)
    elif known:
        bandwidth, _ = known.mem_bandwidth_gbps, filled.append("memory bandwidth")
    else:
        raise PlannerInputError(
            f"host {name!r}: memory bandwidth not recorded and GPU model {model!r} unknown"
        )
    klass = str(host.get("interconnect_class") or "").lower()
    interconnect = "nvlink" if klass == "nvlink" else "pcie"
    link = known.link_gbps if known and known.interconnect == interconnect else (
        450.0 if interconnect == "nvlink" else 55.0)  # fmt: skip
    src = f"measured gpu run {run_id} on {name}"
    if filled:
        src += f" ({', '.join(filled)} from the {known.match} spec sheet)"  # type: ignore[union-attr]
    return HardwareSpec(
        name=name, gpu_model=model, gpu_count=count, memory_bytes=memory,
        mem_bandwidth_gbps=bandwidth, interconnect=interconnect, link_gbps=link,
        bf16_tflops=known.bf16_tflops if known else 400.0,
        fp8_tflops=known.fp8_tflops if known else 800.0,
        source=src + ("" if known else "; FLOPs assumed 400/800 TFLOPS bf16/fp8 (unknown GPU)"),
    )  # fmt: skip


def _num(value: Any) -> bool:
    try:
        return value is not None and float(value) == float(value) and float(value) > 0
    except (TypeError, ValueError):
        return False


def with_count(hw: HardwareSpec, count: int) -> HardwareSpec:
    return replace(hw, gpu_count=count)
