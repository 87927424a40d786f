"""Hardware specs: GPU count, memory size and bandwidth, interconnect class.

From presets (REFERENCE §5 and vendor spec sheets) or from a host's stored ``gpu`` run,
which the page / CLI reads through ``store.queries.planner`` and passes in as plain rows.
"""

from __future__ import annotations

import difflib
import re
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
    aliases: tuple[str, ...] = ()  # other names the driver / tools report for it
    memory: str = "hbm"  # hbm | gddr: GDDR parts stream differently from every fitted GPU

    def names(self) -> tuple[str, ...]:
        return (self.match, *self.aliases)


# Known GPU models, from NVIDIA spec sheets (dense tensor TFLOPS = half the "with sparsity"
# figure). They also fill what a stored `gpu` run could not report (NVML NotSupported).
# link_gbps is per direction; link_latency_us the small-message AllReduce latency class
# (NVLink: vLLM custom / NCCL LL one-shot on 8 GPUs; PCIe: REFERENCE §5 AIConfigurator NCCL).
_GPUS: tuple[_Gpu, ...] = (
    _Gpu("RTX PRO 6000", 96 * GB, 1792, "pcie", 55, 500, 1000,
         "RTX PRO 6000 Blackwell Workstation: 96 GB GDDR7, 1.792 TB/s, PCIe Gen5 x16 "
         "(53-56 GB/s measured P2P) [REFERENCE §5]; FP4 2 PF dense (4 PF sparse, datasheet)",
         fp4_tflops=2000, generation="blackwell", link_latency_us=27.0, memory="gddr"),
    _Gpu("H200", 141 * GIB, 4800, "nvlink", 450, 989, 1979,
         "H200 SXM: 141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s bidirectional [REFERENCE §5]",
         generation="hopper", link_latency_us=6.0),
    _Gpu("H100", 80 * GIB, 3350, "nvlink", 450, 989, 1979,
         "H100 SXM: 80 GB HBM3, 3.35 TB/s, 989/1979 TFLOPS BF16/FP8 dense, NVLink 900 GB/s "
         "bidirectional [H100 datasheet]", generation="hopper", link_latency_us=6.0),
    # The 141 GB H20 keeps the 96 GB one's compute and NVLink, with HBM3e: 141 GB, 4.8 TB/s
    # (issue 21; NVIDIA publishes no public H20 datasheet). The driver names it
    # "NVIDIA H20-3e": vLLM names its tuned MoE configs after torch.cuda.get_device_name()
    # (vllm-project/vllm, vllm/model_executor/layers/fused_moe/configs/
    # E=128,N=192,device_name=NVIDIA_H20-3e.json @ 8a8be3dcc35e02e60c940f7aff3aef8cc7524259);
    # DCGM's NVBandwidth plugin lists it as "NVIDIA H20 HBM3e" (DCGM user guide,
    # docs.nvidia.com/datacenter/dcgm/latest/user-guide/diag-nvbandwidth-plugin.html).
    _Gpu("H20-3e", 141 * GIB, 4800, "nvlink", 450, 148, 296,
         "H20 141 GB (NVML 'NVIDIA H20-3e'): 141 GB HBM3e, 4.8 TB/s, 148/296 TFLOPS BF16/FP8 "
         "dense, NVLink 900 GB/s [H20 product brief; vLLM / DCGM device names]",
         generation="hopper", link_latency_us=6.0, aliases=("H20 HBM3e",)),
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
         "NVLink [L40S datasheet]", generation="ada", link_latency_us=30.0, memory="gddr"),
    # AMD's GPU-to-GPU fabric (Infinity Fabric / xGMI, a full mesh of 7 links of 64 GB/s per
    # direction on an 8-GPU platform) is the planner's scale-up class ("nvlink"); no FP4
    # tensor cores (MXFP4 computes in BF16). NVML cannot see it: it reaches the planner by
    # the name a trace records ("AMD Instinct MI300X") or a host file.
    _Gpu("MI300X", 192 * GB, 5300, "nvlink", 448, 1307.4, 2614.9,
         "AMD Instinct MI300X: 192 GB HBM3, 5.3 TB/s, 1307.4/2614.9 TFLOPS BF16/FP8 dense, "
         "Infinity Fabric 7 x 128 GB/s bidirectional [AMD Instinct MI300X data sheet]",
         generation="cdna3"),
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
    "h20-8x": _preset("h20-8x", "H20"),  # the 96 GB H20 (HBM3, 4.0 TB/s)
    "h20-141g-8x": _preset("h20-141g-8x", "H20-3e"),  # the 141 GB H20 (HBM3e, 4.8 TB/s)
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
        close = difflib.get_close_matches(name, HARDWARE_PRESETS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise PlannerInputError(f"host preset {name!r} unknown ({hint}known: "
                                f"{', '.join(HARDWARE_PRESETS)})")  # fmt: skip
    return HARDWARE_PRESETS[name]


def _tokens(name: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", name.lower()) if t != "nvidia"]


def name_words(name: str) -> list[str]:
    """A GPU name's words, lower case, without the vendor (``h100 80gb hbm3``)."""
    return _tokens(name or "")


def known_gpu(gpu_model: str) -> _Gpu | None:
    """The table's entry for a GPU name as NVML reports it: the entry one of whose names is a
    run of whole words of it, the longest such name winning ("NVIDIA H20-3e" is the 141 GB
    H20, "NVIDIA H20" the 96 GB one, "NVIDIA H200" neither)."""
    words = _tokens(gpu_model or "")
    best: tuple[int, _Gpu] | None = None
    for g in _GPUS:
        for alias in g.names():
            want = _tokens(alias)
            hit = any(words[i : i + len(want)] == want for i in range(len(words) - len(want) + 1))
            if hit and (best is None or len(want) > best[0]):
                best = (len(want), g)
    return best[1] if best else None


def memory_kind(gpu_model: str) -> str:
    """hbm | gddr for a GPU of the known-GPU table; "" for one it does not know."""
    known = known_gpu(gpu_model)
    return known.memory if known else ""


def known_gpu_names() -> list[str]:
    return [g.match for g in _GPUS]


def from_gpu_name(gpu_model: str, count: int, why: str) -> HardwareSpec | None:
    """``count`` GPUs of a model the known-GPU table names (a trace's device name, or
    ``--host MI300X``), spec-sheet figures only; None when the table lacks it. ``why`` says
    where the name came from."""
    g = known_gpu(gpu_model)
    if g is None:
        return None
    return HardwareSpec(
        name=g.match, gpu_model=gpu_model, gpu_count=max(count, 1),
        memory_bytes=g.memory_bytes, mem_bandwidth_gbps=g.mem_bandwidth_gbps,
        interconnect=g.interconnect, link_gbps=g.link_gbps, bf16_tflops=g.bf16_tflops,
        fp8_tflops=g.fp8_tflops, fp4_tflops=g.fp4_tflops, generation=g.generation,
        link_latency_us=g.link_latency_us, source=f"{why}: {g.source}",
    )  # fmt: skip


def from_gpu_run(host: dict[str, Any], devices: list[dict[str, Any]]) -> HardwareSpec:
    """A HardwareSpec from one stored ``gpu`` run: a ``v_gpu_host`` row and its devices.

    NVML gives the GPU count, name, memory size, memory bandwidth (clock x bus width, where
    the driver reports both) and the interconnect class; the known-GPU table, matched by
    name, gives what NVML cannot: tensor TFLOPS, FP4 tensor cores, generation, link
    bandwidth and latency (and memory figures the run lacks). Said in ``source``.
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
    known = known_gpu(model)
    if known is None:
        raise PlannerInputError(
            f"host {name!r}: GPU {model!r} (gpu run {run_id}) is not in the known-GPU table "
            f"({', '.join(known_gpu_names())}), so its TFLOPS and generation are unknown: "
            "describe the host in a host file and pass --host FILE (docs/planner.md: Hosts)"
        )
    mems = [float(d["memory_bytes"]) for d in devices if _num(d.get("memory_bytes"))]
    bws = [float(d["mem_bandwidth_gbps"]) for d in devices if _num(d.get("mem_bandwidth_gbps"))]
    filled = ["TFLOPS", "generation", "link bandwidth and latency"]
    if not bws:
        filled.insert(0, "memory bandwidth")
    if not mems:
        filled.insert(0, "memory size")
    klass = str(host.get("interconnect_class") or "").lower()
    interconnect = "nvlink" if klass == "nvlink" else "pcie"  # mixed: the slowest pair rules
    same_link = known.interconnect == interconnect
    return HardwareSpec(
        name=name, gpu_model=model, gpu_count=count,
        memory_bytes=min(mems) if mems else known.memory_bytes,
        mem_bandwidth_gbps=min(bws) if bws else known.mem_bandwidth_gbps,
        interconnect=interconnect,
        link_gbps=known.link_gbps if same_link else (450.0 if interconnect == "nvlink" else 55.0),
        bf16_tflops=known.bf16_tflops, fp8_tflops=known.fp8_tflops,
        fp4_tflops=known.fp4_tflops, generation=known.generation,
        link_latency_us=known.link_latency_us if same_link else 0.0,
        source=f"measured gpu run {run_id} on {name} ({', '.join(filled)} from the "
               f"{known.match} spec sheet: {known.source})",
    )  # fmt: skip


def _num(value: Any) -> bool:
    try:
        return value is not None and float(value) == float(value) and float(value) > 0
    except (TypeError, ValueError):
        return False


def with_count(hw: HardwareSpec, count: int) -> HardwareSpec:
    return replace(hw, gpu_count=count)
