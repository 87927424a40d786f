"""Host files (planner/specs/host_file.py): good JSON and TOML, and every bad case one line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from planner.errors import PlannerInputError
from planner.specs import hardware, host_file

H20_141 = {
    "gpu_model": "NVIDIA H20-3e", "gpu_count": 8, "memory_gb": 141, "mem_bandwidth_gbps": 4800,
    "interconnect": "nvlink", "link_gbps": 450, "bf16_tflops": 148, "fp8_tflops": 296,
    "generation": "hopper", "link_latency_us": 6,
}  # fmt: skip
TOML = """# 8x H20 141 GB
gpu_model = "NVIDIA H20-3e"
gpu_count = 8
memory_gb = 141
mem_bandwidth_gbps = 4800.0
interconnect = "NVLink"
link_gbps = 450
bf16_tflops = 148
fp8_tflops = 296
generation = "Hopper"
link_latency_us = 6
name = "h20-box"
source = "vendor sheet, rev 2"
"""


def write(tmp: Path, data: dict | str, name: str = "host.json") -> Path:
    path = tmp / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def same_hardware(a: hardware.HardwareSpec, b: hardware.HardwareSpec) -> bool:
    return replace(a, name="", source="") == replace(b, name="", source="")


def test_json_file_is_the_preset_it_describes(tmp_path: Path) -> None:
    hw = host_file.load(write(tmp_path, H20_141, "h20.json"))
    assert same_hardware(hw, hardware.preset("h20-141g-8x"))
    assert hw.name == "h20" and hw.source == f"host file {tmp_path / 'h20.json'}"


def test_toml_file_with_optional_fields_and_any_case_words(tmp_path: Path) -> None:
    hw = host_file.load(write(tmp_path, TOML, "h20.toml"))
    assert same_hardware(hw, hardware.preset("h20-141g-8x"))
    assert hw.name == "h20-box" and hw.source.endswith("h20.toml: vendor sheet, rev 2")


def test_content_decides_without_an_extension(tmp_path: Path) -> None:
    assert host_file.load(write(tmp_path, H20_141, "myhost")).gpu_count == 8
    assert host_file.load(write(tmp_path, TOML, "myhost.cfg")).name == "h20-box"


def test_blackwell_fp4_and_an_nvlink_domain(tmp_path: Path) -> None:
    data = {**H20_141, "gpu_model": "NVIDIA GB300", "gpu_count": 4, "generation": "blackwell",
            "fp4_tflops": 15000, "max_gpus": 72}  # fmt: skip
    hw = host_file.load(write(tmp_path, data))
    assert (hw.fp4_tflops, hw.max_gpus, hw.generation) == (15000, 72, "blackwell")
    assert hw.tflops("nvfp4") == 15000
    # whole-number floats are whole numbers; a domain equal to the host is no domain
    hw = host_file.load(write(tmp_path, {**H20_141, "gpu_count": 8.0, "max_gpus": 8}))
    assert hw.gpu_count == 8 and isinstance(hw.gpu_count, int) and hw.max_gpus == 0


BAD = [
    ({"memory_gib": 141}, "unknown field 'memory_gib' (did you mean memory_gb?)"),
    ({"fp4_tflop": 10}, "unknown field 'fp4_tflop' (did you mean fp4_tflops?)"),
    ({"colour": "green"}, "unknown field 'colour' (fields: gpu_model, gpu_count,"),
    ({"gpu_count": 0}, "field 'gpu_count': 0 must be > 0"),
    ({"gpu_count": -8}, "field 'gpu_count': -8 must be > 0"),
    ({"gpu_count": 8.5}, "field 'gpu_count': 8.5 is not a whole number"),
    ({"gpu_count": True}, "field 'gpu_count': True is not a number"),
    ({"gpu_count": "8"}, "field 'gpu_count': '8' is text; write the number without quotes"),
    ({"memory_gb": -1}, "field 'memory_gb': -1 must be > 0"),
    ({"memory_gb": 143771}, "field 'memory_gb': 143771 is over 4096"),
    ({"mem_bandwidth_gbps": [4800]}, "field 'mem_bandwidth_gbps': [4800] is not a number"),
    ({"link_gbps": 0}, "field 'link_gbps': 0 must be > 0"),
    ({"fp8_tflops": -1}, "field 'fp8_tflops': -1 must be >= 0"),
    ({"interconnect": "nvlnk"}, "field 'interconnect': 'nvlnk' is not one of pcie, nvlink "
     "(did you mean nvlink?)"),
    ({"interconnect": "infiniband"}, "field 'interconnect': 'infiniband' is not one of pcie, "
     "nvlink"),
    ({"generation": "hoper"}, "(did you mean hopper?)"),
    ({"gpu_model": ""}, "field 'gpu_model': '' is not a name"),
    ({"gpu_model": 100}, "field 'gpu_model': 100 is not a name"),
    ({"fp4_tflops": 2000}, "field 'fp4_tflops': hopper GPUs have no FP4 tensor cores"),
    ({"generation": "ampere"}, "field 'fp8_tflops': ampere GPUs have no FP8 tensor cores"),
    ({"max_gpus": 4}, "field 'max_gpus': 4 is fewer than gpu_count 8"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_field_is_one_line_naming_file_and_field(tmp_path: Path, change: dict,
                                                     message: str) -> None:  # fmt: skip
    path = write(tmp_path, {**H20_141, **change})
    with pytest.raises(PlannerInputError) as err:
        host_file.load(path)
    text = str(err.value)
    assert text.startswith(f"host file {path}: ") and message in text, text
    assert "\n" not in text


def test_missing_fields_are_named_with_what_they_mean(tmp_path: Path) -> None:
    data = {k: v for k, v in H20_141.items() if k not in ("memory_gb", "link_latency_us")}
    with pytest.raises(PlannerInputError, match=r"missing fields memory_gb, link_latency_us "
                       r"\(memory_gb: memory per GPU"):  # fmt: skip
        host_file.load(write(tmp_path, data))


@pytest.mark.parametrize(("name", "content", "message"), [
    ("h.json", '{"gpu_count": 8,}', "not valid JSON (Expecting property name enclosed in "
     "double quotes at line 1 column 17)"),
    ("h.json", '{"gpu_count": NaN}', "NaN is not a number a host file can hold"),
    ("h.json", "[1, 2]", "a JSON object of fields, not list"),
    ("h.toml", "gpu_count = = 8", "not valid TOML (Invalid value (at line 1, column 13))"),
    ("h.toml", "", "empty (fields: gpu_model"),
    ("h.toml", "[host]\ngpu_count = 8\n", "unknown field 'host'"),
])  # fmt: skip
def test_unreadable_content_is_one_line(tmp_path: Path, name: str, content: str,
                                        message: str) -> None:  # fmt: skip
    with pytest.raises(PlannerInputError) as err:
        host_file.load(write(tmp_path, content, name))
    assert message in str(err.value) and str(err.value).startswith(f"host file {tmp_path}")


def test_file_problems_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(PlannerInputError, match="no such file"):
        host_file.load(tmp_path / "nope.toml")
    with pytest.raises(PlannerInputError, match="is a folder"):
        host_file.load(tmp_path)
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PlannerInputError, match="not UTF-8"):
        host_file.load(tmp_path / "bin.json")
    (tmp_path / "big.json").write_text(" " * 70_000)
    with pytest.raises(PlannerInputError, match="over 64 KiB"):
        host_file.load(tmp_path / "big.json")


def test_uploaded_bytes_parse_like_a_file() -> None:
    hw = host_file.parse(TOML.encode(), "upload.toml")
    assert hw.name == "h20-box" and hw.source.startswith("host file upload.toml")
    with pytest.raises(PlannerInputError, match="^host file upload.json: not valid JSON"):
        host_file.parse(b"{", "upload.json")
