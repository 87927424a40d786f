"""Host files: a host the presets do not cover, described in JSON or TOML.

    {"gpu_model": "NVIDIA H20-3e", "gpu_count": 8, "memory_gb": 141, "mem_bandwidth_gbps": 4800,
     "interconnect": "nvlink", "link_gbps": 450, "bf16_tflops": 148, "fp8_tflops": 296,
     "generation": "hopper", "link_latency_us": 6}

The format is chosen by the extension (``.json`` / ``.toml``), else by the content (a ``{``
first means JSON). Every rule below gives one line naming the file and the field:

- every field of ``HOST_FIELDS`` marked required must be there;
- an unknown key is an error, with the nearest field name: a misspelt optional field
  (``fp4_tflop``) would otherwise be dropped and the answer silently wrong;
- numbers are JSON / TOML numbers (a quoted ``"4800"`` is refused, so are booleans, NaN and
  infinity); whole-number fields take ``8`` or ``8.0``, not ``8.5``; each has a range;
- ``interconnect`` and ``generation`` are one of their words (any case);
- what the silicon cannot have is refused: FP4 tensor cores before Blackwell, FP8 tensor
  cores on Ampere, an NVLink domain smaller than the host.

``memory_gb`` is the spec sheet's figure, and spec-sheet GB of GPU memory are binary
(an H200's "141 GB" is 143,771 MiB in nvidia-smi), as the presets read them.
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.errors import PlannerInputError
from planner.specs.hardware import GIB, HardwareSpec

GENERATIONS = ("ampere", "ada", "hopper", "blackwell")
INTERCONNECTS = ("pcie", "nvlink")
MAX_BYTES = 64 * 1024  # a host file is a dozen lines; anything bigger is the wrong file


@dataclass(frozen=True)
class HostField:
    name: str
    kind: type  # str, int or float
    required: bool
    doc: str
    high: float = math.inf  # numbers: upper bound (inclusive)
    zero_ok: bool = False  # numbers: 0 allowed (otherwise > 0)
    choices: tuple[str, ...] = ()


HOST_FIELDS: tuple[HostField, ...] = (
    HostField("gpu_model", str, True, "GPU name as nvidia-smi prints it (NVIDIA H20-3e)"),
    HostField("gpu_count", int, True, "GPUs in the host", high=4096),
    HostField("memory_gb", float, True, "memory per GPU, the spec sheet's (binary) GB",
              high=4096),  # fmt: skip
    HostField("mem_bandwidth_gbps", float, True, "memory bandwidth per GPU, GB/s",
              high=100_000),  # fmt: skip
    HostField("interconnect", str, True, "pcie or nvlink", choices=INTERCONNECTS),
    HostField("link_gbps", float, True, "GPU-to-GPU GB/s per direction (NVLink4 450, PCIe5 55)",
              high=10_000),  # fmt: skip
    HostField("bf16_tflops", float, True, "dense BF16 tensor TFLOPS (half the sparse figure)",
              high=100_000),  # fmt: skip
    HostField("fp8_tflops", float, True, "dense FP8 tensor TFLOPS; 0 = no FP8 tensor cores",
              high=100_000, zero_ok=True),  # fmt: skip
    HostField("fp4_tflops", float, False, "dense FP4 tensor TFLOPS; omit or 0 = none",
              high=100_000, zero_ok=True),  # fmt: skip
    HostField("generation", str, True, "ampere, ada, hopper or blackwell", choices=GENERATIONS),
    HostField("link_latency_us", float, True,
              "small-message AllReduce latency, us (NVLink 6, PCIe 27)", high=10_000),  # fmt: skip
    HostField("name", str, False, "label in the answers (default: the file's name)"),
    HostField("max_gpus", int, False, "GPUs one NVLink domain reaches (NVL72: 72)", high=4096),
    HostField("source", str, False, "where the numbers come from (shown with every answer)"),
)  # fmt: skip
FIELDS = {f.name: f for f in HOST_FIELDS}


def load(path: str | Path) -> HardwareSpec:
    """The HardwareSpec a host file describes; PlannerInputError (one line) otherwise."""
    path = Path(path)
    where = f"host file {path}"
    try:
        if path.stat().st_size > MAX_BYTES:
            raise PlannerInputError(f"{where}: over {MAX_BYTES // 1024} KiB, not a host file")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PlannerInputError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise PlannerInputError(f"{where}: is a folder, not a file") from None
    except OSError as exc:
        raise PlannerInputError(f"{where}: cannot be read ({exc.strerror})") from None
    return parse(raw, path.name, where)


def parse(raw: bytes, filename: str, where: str | None = None) -> HardwareSpec:
    """A host file's bytes (an upload on a page, or a file's content) -> HardwareSpec."""
    where = where or f"host file {filename}"
    if len(raw) > MAX_BYTES:
        raise PlannerInputError(f"{where}: over {MAX_BYTES // 1024} KiB, not a host file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PlannerInputError(f"{where}: not UTF-8 text (a JSON or TOML file)") from None
    data = _decode(text, filename, where)
    return to_spec(data, Path(filename).stem or "host", where)


def _decode(text: str, filename: str, where: str) -> dict[str, Any]:
    ext = Path(filename).suffix.lower()
    as_json = ext == ".json" or (ext != ".toml" and text.lstrip().startswith("{"))
    if not text.strip():
        raise PlannerInputError(f"{where}: empty (fields: {', '.join(FIELDS)})")
    try:
        data = json.loads(text, parse_constant=_no_constant) if as_json else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerInputError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} "
                                f"column {exc.colno})") from None  # fmt: skip
    except tomllib.TOMLDecodeError as exc:
        raise PlannerInputError(f"{where}: not valid TOML ({exc})") from None
    except ValueError as exc:  # NaN / Infinity in JSON
        raise PlannerInputError(f"{where}: {exc}") from None
    if not isinstance(data, dict):
        raise PlannerInputError(f"{where}: a JSON object of fields, not {type(data).__name__}")
    return data


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a host file can hold")


def _near(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def to_spec(data: dict[str, Any], default_name: str, where: str) -> HardwareSpec:
    """Check the fields (rules in the module docstring) and build the HardwareSpec."""
    for key in data:
        if key not in FIELDS:
            hint = _near(str(key), FIELDS) or f" (fields: {', '.join(FIELDS)})"
            raise PlannerInputError(f"{where}: unknown field {key!r}{hint}")
    missing = [f.name for f in HOST_FIELDS if f.required and f.name not in data]
    if missing:
        docs = "; ".join(f"{n}: {FIELDS[n].doc}" for n in missing)
        raise PlannerInputError(f"{where}: missing field{'s' if len(missing) > 1 else ''} "
                                f"{', '.join(missing)} ({docs})")  # fmt: skip
    v = {f.name: _value(f, data[f.name], where) for f in HOST_FIELDS if f.name in data}
    gen, fp4, fp8 = v["generation"], v.get("fp4_tflops", 0.0), v["fp8_tflops"]
    if fp4 and gen != "blackwell":
        raise PlannerInputError(f"{where}: field 'fp4_tflops': {gen} GPUs have no FP4 tensor "
                                "cores (Blackwell on); omit it or set 0")  # fmt: skip
    if fp8 and gen == "ampere":
        raise PlannerInputError(f"{where}: field 'fp8_tflops': ampere GPUs have no FP8 tensor "
                                "cores; set 0")  # fmt: skip
    domain = v.get("max_gpus", 0)
    if domain and domain < v["gpu_count"]:
        raise PlannerInputError(f"{where}: field 'max_gpus': {domain} is fewer than gpu_count "
                                f"{v['gpu_count']}")  # fmt: skip
    source = where + (f": {v['source']}" if "source" in v else "")
    return HardwareSpec(
        name=v.get("name", default_name), gpu_model=v["gpu_model"], gpu_count=v["gpu_count"],
        memory_bytes=v["memory_gb"] * GIB, mem_bandwidth_gbps=v["mem_bandwidth_gbps"],
        interconnect=v["interconnect"], link_gbps=v["link_gbps"],
        bf16_tflops=v["bf16_tflops"], fp8_tflops=fp8, fp4_tflops=fp4, generation=gen,
        link_latency_us=v["link_latency_us"],
        max_gpus=domain if domain > v["gpu_count"] else 0, source=source,
    )  # fmt: skip


def _value(f: HostField, value: Any, where: str) -> Any:
    bad = f"{where}: field {f.name!r}:"
    if f.kind is str:
        if not isinstance(value, str) or not value.strip():
            raise PlannerInputError(f"{bad} {value!r} is not a name (give text)")
        if not f.choices:
            return value.strip()
        word = value.strip().lower()
        if word not in f.choices:
            raise PlannerInputError(f"{bad} {value!r} is not one of {', '.join(f.choices)}"
                                    f"{_near(word, f.choices)}")  # fmt: skip
        return word
    if isinstance(value, str):
        raise PlannerInputError(f"{bad} {value!r} is text; write the number without quotes")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(f"{bad} {value!r} is not a number")
    if not math.isfinite(value):
        raise PlannerInputError(f"{bad} {value!r} is not a finite number")
    if f.kind is int and value != int(value):
        raise PlannerInputError(f"{bad} {value!r} is not a whole number")
    if value < 0 or (value == 0 and not f.zero_ok):
        raise PlannerInputError(f"{bad} {value!r} must be {'>= 0' if f.zero_ok else '> 0'}")
    if value > f.high:
        raise PlannerInputError(f"{bad} {value!r} is over {f.high:g} ({f.doc})")
    return int(value) if f.kind is int else float(value)
