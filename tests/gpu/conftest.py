"""The NVML stand-in, selected the way a user would select another pynvml module."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from collectors.nvml import ENV_MODULE

FAKES = Path(__file__).resolve().parents[1] / "fakes"
FAKE_MODULE = "tests.fakes.fake_pynvml"
SPEC_ENV = "STEPSCOPE_FAKE_NVML_SPEC"
PCIE = FAKES / "nvml_rtxpro6000_pcie.json"
NVLINK = FAKES / "nvml_h100_sxm_nvlink.json"
MIXED = FAKES / "nvml_mixed_a6000_bridges.json"


def fake_env(spec: Path) -> dict[str, str]:
    """Environment for a subprocess (the CLI) that sees the machine ``spec`` describes."""
    return {ENV_MODULE: FAKE_MODULE, SPEC_ENV: str(spec)}


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
