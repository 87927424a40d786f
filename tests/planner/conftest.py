"""A real store for the planner's store-side tests: a 2-GPU host recorded through the fake
NVML (the hardware boundary) and a real gloo comm run on CPU, both via the real CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT, run_cli

SPEC = ROOT / "tests" / "fakes" / "nvml_rtxpro6000_pcie.json"


@dataclass
class PlannerStore:
    path: Path
    host: str
    comm_run: str
    gpu_run: str


def two_gpu_spec(tmp: Path) -> Path:
    spec = json.loads(SPEC.read_text())
    spec["gpu_count"] = 2
    spec["gpus"] = spec["gpus"][:2]
    out = tmp / "nvml_2x_rtxpro6000.json"
    out.write_text(json.dumps(spec))
    return out


def fill_store(tmp: Path, host: str = "rtx-node-2") -> PlannerStore:
    store = tmp / "stepscope.duckdb"
    env = {"STEPSCOPE_NVML_MODULE": "tests.fakes.fake_pynvml",
           "STEPSCOPE_FAKE_NVML_SPEC": str(two_gpu_spec(tmp))}  # fmt: skip
    gpu = run_cli(store, "gpu", "--host", host, "--json", **env)
    assert gpu.code == 0, gpu.stderr
    comm = run_cli(store, "comm", "--device", "cpu", "--nproc", "2", "--host", host,
                   "--tokens", "1,4,16", "--ops", "all_reduce,all_to_all", "--iters", "5",
                   "--warmup", "1", "--json", timeout=300)  # fmt: skip
    assert comm.code == 0, comm.stderr
    return PlannerStore(store, host, comm.json["run_id"], gpu.json["run_id"])


@pytest.fixture(scope="session")
def planner_store(tmp_path_factory) -> PlannerStore:
    return fill_store(tmp_path_factory.mktemp("planner-store"))
