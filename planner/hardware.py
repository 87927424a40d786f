"""Hardware specs: GPU count, memory size and bandwidth, interconnect class.

From presets (REFERENCE §5 and vendor spec sheets) or from a host's stored ``gpu`` run,
which the page / CLI reads through ``store.queries_planner`` and passes in as plain rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from planner.errors import PlannerInputError

GB = 1e9
GIB = 2**30  # HBM capacities on spec sheets are GiB (B200 "180 GB" = 183,359 MiB in nvidia-smi)


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
    fp4_tflops: float = 0.0  # dense FP4 tensor throughput; 0 = no FP4 tensor cores
    generation: str = ""  # ampere | ada | hopper | blackwell (kernel availability)
    link_latency_us: float = 0.0  # small-message AllReduce latency; 0 = interconnect default
    max_gpus: int = 0  # GPUs one NVLink domain reaches (GB200/GB300 NVL72); 0 = gpu_count

    def tflops(self, dtype: str) -> float:
        if dtype in ("nvfp4", "mxfp4", "fp4") and self.fp4_tflops:
            return self.fp4_tflops
        if dtype.startswith(("fp8", "int8", "nvfp4", "mxfp4")) and self.fp8_tflops:
            return self.fp8_tflops
        return self.bf16_tflops


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
    fp4_tflops: float = 0.0
    generation: str = ""
    link_latency_us: float = 0.0


# Known GPU models, from NVIDIA spec sheets (dense tensor TFLOPS = half the "with sparsity"
# figure). They also fill what a stored `gpu` run could not report (NVML NotSupported).
# link_gbps is per direction; link_latency_us the small-message AllReduce latency class
# (NVLink: vLLM custom / NCCL LL one-shot on 8 GPUs; PCIe: REFERENCE §5 AIConfigurator NCCL).
_GPUS: tuple[_Gpu, ...] = (
    _Gpu("RTX PRO 6000", 96 * GB, 1792, "pcie", 55, 500, 1000,
         "RTX PRO 6000 Blackwell Workstation: 96 GB GDDR7, 1.792 TB/s, PCIe Gen5 x16 "
         "(53-56 GB/s measured P2P) [REFERENCE §5]; FP4 2 PF dense (4 PF sparse, datasheet)",
         fp4_tflops=2000, generation="blackwell", link_latency_us=27.0),
    _Gpu("H200", 141 * GIB, 4800, "nvlink", 450, 989, 1979,
         "H200 SXM: 141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s bidirectional [REFERENCE §5]",
         generation="hopper", link_latency_us=6.0),
    _Gpu("H100", 80 * GIB, 3350, "nvlink", 450, 989, 1979,
         "H100 SXM: 80 GB HBM3, 3.35 TB/s, 989/1979 TFLOPS BF16/FP8 dense, NVLink 900 GB/s "
         "bidirectional [H100 datasheet]", generation="hopper", link_latency_us=6.0),
    _Gpu("H20", 96 * GIB, 4000, "nvlink", 450, 148, 296,
         "H20: 96 GB HBM3, 4.0 TB/s, 148/296 TFLOPS BF16/FP8 dense, NVLink 900 GB/s "
         "[H20 product brief]", generation="hopper", link_latency_us=6.0),
    _Gpu("GB300", 288 * GIB, 8000, "nvlink", 900, 2500, 5000,
         "GB300 NVL72 per GPU: 288 GB HBM3e, 8 TB/s, 15 PF FP4 dense, NVLink5 1.8 TB/s "
         "bidirectional [GB300 NVL72 datasheet]", fp4_tflops=15000, generation="blackwell",
         link_latency_us=5.0),
    _Gpu("GB200", 186 * GIB, 8000, "nvlink", 900, 2500, 5000,
         "GB200 NVL72 per GPU: 186 GB HBM3e, 8 TB/s, 10 PF FP4 dense, NVLink5 1.8 TB/s "
         "bidirectional [GB200 NVL72 datasheet]", fp4_tflops=10000, generation="blackwell",
         link_latency_us=5.0),
    _Gpu("B300", 288 * GIB, 8000, "nvlink", 900, 2250, 4500,
         "HGX B300 per GPU: 288 GB HBM3e, 8 TB/s, 13.5 PF FP4 dense, NVLink5 1.8 TB/s "
         "bidirectional [HGX B300 datasheet]", fp4_tflops=13500, generation="blackwell",
         link_latency_us=5.0),
    _Gpu("B200", 180 * GIB, 8000, "nvlink", 900, 2250, 4500,
         "HGX B200 per GPU: 180 GB HBM3e, 8 TB/s, 2.25/4.5/9 PF BF16/FP8/FP4 dense, NVLink5 "
         "1.8 TB/s bidirectional [HGX B200 datasheet]", fp4_tflops=9000,
         generation="blackwell", link_latency_us=5.0),
    _Gpu("A100", 80 * GIB, 2039, "nvlink", 300, 312, 0,
         "A100 SXM 80GB: 2.039 TB/s HBM2e, 312 TFLOPS BF16 dense, no FP8/FP4 tensor cores, "
         "NVLink3 600 GB/s bidirectional [A100 datasheet]", generation="ampere",
         link_latency_us=12.0),
    _Gpu("L40S", 48 * GB, 864, "pcie", 25, 362, 733,
         "L40S: 48 GB GDDR6, 864 GB/s, 362/733 TFLOPS BF16/FP8 dense, PCIe Gen4 x16, no "
         "NVLink [L40S datasheet]", generation="ada", link_latency_us=30.0),
)  # fmt: skip


def _preset(name: str, gpu: str, count: int = 8, max_gpus: int = 0) -> HardwareSpec:
    g = next(x for x in _GPUS if x.match == gpu)
    return HardwareSpec(
        name=name, gpu_model=f"NVIDIA {gpu}", gpu_count=count, memory_bytes=g.memory_bytes,
        mem_bandwidth_gbps=g.mem_bandwidth_gbps, interconnect=g.interconnect,
        link_gbps=g.link_gbps, bf16_tflops=g.bf16_tflops, fp8_tflops=g.fp8_tflops,
        source=f"preset {name}: {g.source}", fp4_tflops=g.fp4_tflops,
        generation=g.generation, link_latency_us=g.link_latency_us, max_gpus=max_gpus,
    )  # fmt: skip


HARDWARE_PRESETS: dict[str, HardwareSpec] = {
    "rtx-pro-6000-pcie-8x": _preset("rtx-pro-6000-pcie-8x", "RTX PRO 6000"),
    "h100-sxm-8x": _preset("h100-sxm-8x", "H100"),
    "h200-sxm-8x": _preset("h200-sxm-8x", "H200"),
    "h20-8x": _preset("h20-8x", "H20"),
    "a100-sxm-8x": _preset("a100-sxm-8x", "A100"),
    "l40s-pcie-8x": _preset("l40s-pcie-8x", "L40S"),
    "b200-sxm-8x": _preset("b200-sxm-8x", "B200"),
    "b300-sxm-8x": _preset("b300-sxm-8x", "B300"),
    # One compute tray (4 GPUs) of an NVL72 rack; --gpus up to 72 stays on NVLink.
    "gb200-nvl72-4x": _preset("gb200-nvl72-4x", "GB200", 4, max_gpus=72),
    "gb300-nvl72-4x": _preset("gb300-nvl72-4x", "GB300", 4, max_gpus=72),
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
        fp4_tflops=known.fp4_tflops if known else 0.0,
        generation=known.generation if known else "",
        link_latency_us=known.link_latency_us if known and known.interconnect == interconnect
        else 0.0,
        source=src + ("" if known else "; FLOPs assumed 400/800 TFLOPS bf16/fp8 (unknown GPU)"),
    )  # fmt: skip


def _num(value: Any) -> bool:
    try:
        return value is not None and float(value) == float(value) and float(value) > 0
    except (TypeError, ValueError):
        return False


def with_count(hw: HardwareSpec, count: int) -> HardwareSpec:
    return replace(hw, gpu_count=count)
