"""Hardware specs: presets and a stored `gpu` run's rows."""

from __future__ import annotations

import pytest

from planner import hardware
from planner.errors import PlannerInputError


def test_presets_follow_reference_section_5() -> None:
    rtx = hardware.preset("rtx-pro-6000-pcie-8x")
    assert (rtx.gpu_count, rtx.memory_bytes, rtx.mem_bandwidth_gbps) == (8, 96e9, 1792)
    assert rtx.interconnect == "pcie"
    h200 = hardware.preset("h200-sxm-8x")
    assert (h200.mem_bandwidth_gbps, h200.interconnect) == (4800, "nvlink")
    # HBM sizes are GiB: nvidia-smi reports 81,559 MiB on an H100 SXM "80 GB"
    assert hardware.preset("h100-sxm-8x").memory_bytes == 80 * 2**30
    with pytest.raises(PlannerInputError, match="unknown"):
        hardware.preset("tpu-v5")


def test_issue_13_presets_exist_with_sources_and_generation_features() -> None:
    names = ("h100-sxm-8x", "h200-sxm-8x", "h20-8x", "b200-sxm-8x", "b300-sxm-8x",
             "gb200-nvl72-4x", "gb300-nvl72-4x", "a100-sxm-8x", "l40s-pcie-8x",
             "rtx-pro-6000-pcie-8x")  # fmt: skip
    for name in names:
        hw = hardware.preset(name)
        assert hw.source and hw.bf16_tflops > 0 and hw.link_gbps > 0 and hw.link_latency_us > 0
        assert (hw.fp4_tflops > 0) == (hw.generation == "blackwell"), name
    assert hardware.preset("a100-sxm-8x").fp8_tflops == 0  # Ampere: no FP8 tensor cores
    assert {hardware.preset(n).interconnect for n in ("l40s-pcie-8x", "rtx-pro-6000-pcie-8x")} == {
        "pcie"}  # fmt: skip
    assert hardware.preset("gb200-nvl72-4x").max_gpus == 72


def _host(**kw):
    row = {"run_id": "r1", "host": "node", "gpu_count": 2, "gpu_model": "NVIDIA H200",
           "interconnect_class": "nvlink"}  # fmt: skip
    row.update(kw)
    return row


def test_from_gpu_run_uses_measured_values() -> None:
    devs = [{"memory_bytes": 150e9, "mem_bandwidth_gbps": 4000.0}] * 2
    hw = hardware.from_gpu_run(_host(), devs)
    assert (hw.gpu_count, hw.memory_bytes, hw.mem_bandwidth_gbps) == (2, 150e9, 4000.0)
    assert hw.interconnect == "nvlink" and "gpu run r1" in hw.source


def test_from_gpu_run_fills_unreported_bandwidth_from_known_model() -> None:
    devs = [{"memory_bytes": 96e9, "mem_bandwidth_gbps": None}] * 8
    hw = hardware.from_gpu_run(
        _host(gpu_count=8, gpu_model="NVIDIA RTX PRO 6000 Blackwell Server Edition",
              interconnect_class="pcie-only"), devs)  # fmt: skip
    assert hw.mem_bandwidth_gbps == 1792 and hw.interconnect == "pcie"
    assert "memory bandwidth from the RTX PRO 6000 spec sheet" in hw.source


def test_bad_gpu_runs() -> None:
    with pytest.raises(PlannerInputError, match="no GPUs recorded in gpu run r1"):
        hardware.from_gpu_run(_host(gpu_count=0), [])
    with pytest.raises(PlannerInputError, match="memory bandwidth not recorded"):
        hardware.from_gpu_run(_host(gpu_model="Mystery GPU"), [{"memory_bytes": 1e10}])
