"""Hardware specs: presets and a stored `gpu` run's rows."""

from __future__ import annotations

import pytest

from planner.errors import PlannerInputError
from planner.specs import hardware


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
    names = ("h100-sxm-8x", "h200-sxm-8x", "h20-8x", "h20-141g-8x", "b200-sxm-8x", "b300-sxm-8x",
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
    assert "memory bandwidth, TFLOPS" in hw.source and "RTX PRO 6000 spec sheet" in hw.source


def test_bad_gpu_runs() -> None:
    with pytest.raises(PlannerInputError, match="no GPUs recorded in gpu run r1"):
        hardware.from_gpu_run(_host(gpu_count=0), [])
    # Measured memory and bandwidth are not enough: TFLOPS and generation would be guesses.
    devs = [{"memory_bytes": 1e10, "mem_bandwidth_gbps": 900.0}]
    with pytest.raises(PlannerInputError, match=r"GPU 'Mystery GPU' \(gpu run r1\) is not in "
                       "the known-GPU table .* --host FILE"):  # fmt: skip
        hardware.from_gpu_run(_host(gpu_model="Mystery GPU"), devs)


def test_h20_141g_beside_the_96g_one() -> None:
    h20, big = hardware.preset("h20-8x"), hardware.preset("h20-141g-8x")
    assert (h20.memory_bytes, h20.mem_bandwidth_gbps) == (96 * 2**30, 4000)  # unchanged
    assert (big.memory_bytes, big.mem_bandwidth_gbps) == (141 * 2**30, 4800)
    assert big.gpu_model == "NVIDIA H20-3e" and big.generation == "hopper"
    assert (big.bf16_tflops, big.fp8_tflops, big.fp4_tflops) == (148, 296, 0)


@pytest.mark.parametrize(("name", "match"), [
    ("NVIDIA H20-3e", "H20-3e"), ("NVIDIA H20 HBM3e", "H20-3e"), ("NVIDIA H20", "H20"),
    ("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA B200", "B200"),
    ("NVIDIA GB200", "GB200"), ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000"),
    ("NVIDIA H800", None), ("NVIDIA GH200 480GB", None), ("", None),
])  # fmt: skip
def test_gpu_names_match_whole_words(name: str, match: str | None) -> None:
    known = hardware.known_gpu(name)
    assert (known.match if known else None) == match


def test_stored_h20_3e_gets_its_own_spec_sheet() -> None:
    devs = [{"memory_bytes": 143771 * 2**20, "mem_bandwidth_gbps": None}] * 8
    hw = hardware.from_gpu_run(_host(gpu_count=8, gpu_model="NVIDIA H20-3e"), devs)
    assert hw.mem_bandwidth_gbps == 4800 and hw.bf16_tflops == 148
    assert "memory bandwidth, TFLOPS" in hw.source and "H20-3e spec sheet" in hw.source


def test_unknown_preset_suggests_the_nearest() -> None:
    with pytest.raises(PlannerInputError, match="did you mean h20-141g-8x"):
        hardware.preset("h20-141g")
