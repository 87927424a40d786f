"""The NVML stand-in, selected the way a user would select another pynvml module."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from collectors.inventory.gpu_topo import normalize_bus_id
from collectors.inventory.nvml import ENV_MODULE
from collectors.inventory.nvml_types import SYSFS_ENV

FAKES = Path(__file__).resolve().parents[1] / "fakes"
FAKE_MODULE = "tests.fakes.fake_pynvml"
SPEC_ENV = "STEPSCOPE_FAKE_NVML_SPEC"
PCIE = FAKES / "nvml_rtxpro6000_pcie.json"
NVLINK = FAKES / "nvml_h100_sxm_nvlink.json"
MIXED = FAKES / "nvml_mixed_a6000_bridges.json"


def fake_sysfs(spec: Path, root: Path | None = None) -> Path:
    """A tree shaped like /sys with ``bus/pci/devices/<bdf>/numa_node`` for each GPU of
    ``spec`` (its ``numa_node``, else -1 as Linux writes on a single-node machine)."""
    data = json.loads(spec.read_text())
    if root is None:
        key = hashlib.sha256(f"{spec.resolve()}:{spec.read_text()}".encode()).hexdigest()[:16]
        root = Path(tempfile.gettempdir()) / f"stepscope-fake-sysfs-{key}"
    base, overrides = data.get("gpu", {}), data.get("gpus", [])
    for i in range(int(data.get("gpu_count", len(overrides)))):
        gpu = {**base, **(overrides[i] if i < len(overrides) else {})}
        bus = normalize_bus_id(gpu.get("pci_bus_id") or f"00000000:{0x18 + 0x10 * i:02X}:00.0")
        node = root / "bus/pci/devices" / str(bus)
        node.mkdir(parents=True, exist_ok=True)
        node.joinpath("numa_node").write_text(f"{gpu.get('numa_node', -1)}\n")
    return root


def fake_env(spec: Path) -> dict[str, str]:
    """Environment for a subprocess (the CLI) that sees the machine ``spec`` describes."""
    return {ENV_MODULE: FAKE_MODULE, SPEC_ENV: str(spec), SYSFS_ENV: str(fake_sysfs(spec))}


@pytest.fixture
def use_spec(monkeypatch) -> Callable[[Path], None]:
    def use(spec: Path) -> None:
        for key, value in fake_env(spec).items():
            monkeypatch.setenv(key, value)

    return use


@pytest.fixture
def spec_variant(tmp_path: Path) -> Callable[..., Path]:
    """A copy of a spec with some keys changed (written to a temp file)."""

    def make(base: Path, **changes: object) -> Path:
        spec = json.loads(base.read_text())
        spec.update(changes)
        path = tmp_path / f"variant-{len(list(tmp_path.glob('variant-*')))}.json"
        path.write_text(json.dumps(spec))
        return path

    return make
