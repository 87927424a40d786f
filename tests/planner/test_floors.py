"""Physical floors (planner.cost.floors) read the serving model's own ops: one model of bytes
and FLOPs, priced at the spec sheet instead of the fitted efficiencies."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from planner.cost.comm import CommCurve
from planner.cost.floors import KERNEL_FLOOR_US, step_floors
from planner.cost.params import FITTED
from planner.cost.step import decode_terms
from planner.cost.step_ops import StepShape
from planner.cost.types import ServeLayout, Workload
from planner.specs import hardware, models
from planner.tradeoff import reference
from tests.helpers import FIXTURES, ROOT

CONFIGS = FIXTURES / "serving" / "configs"
UNIT = FITTED.with_values(bw_eff=1.0, mfu=1.0, kernel_us=0.0, expert_us=0.0, moe_eff=1.0,
                          compute_scale=1.0, seq_us={})  # fmt: skip


@pytest.mark.parametrize("config", ["Qwen--Qwen3-8B", "Qwen--Qwen3-235B-A22B-FP8"])
def test_the_prediction_at_spec_efficiency_is_the_sum_of_the_floors(config: str) -> None:
    """At 16 sequences every op is bandwidth-bound: the prediction with every fitted
    efficiency at 1 and no kernel overheads is the floors' sum, op for op."""
    m = models.load(CONFIGS / f"{config}_config.json")
    hw = hardware.preset("h100-sxm-8x")
    lay, w = ServeLayout(tp=2), Workload(1024, 2)
    b = np.array([16.0])
    predicted_ms = sum(float(v[0]) for v in decode_terms(m, hw, lay, w, b, UNIT).values())
    shape = StepShape.decode(b, 1024 + 1, b)  # decode_terms' mean context: isl + osl / 2
    calls = {"gemm": 1, "attention": 1, "sampling": 1} | ({"moe": 1} if m.num_experts else {})
    floors = step_floors(m, hw, lay, w, shape, calls, [])
    assert sum(f.us for f in floors.values()) / 1e3 == pytest.approx(predicted_ms, rel=1e-9)
    assert ("moe" in floors) == bool(m.num_experts)


def test_floors_ignore_the_fitted_efficiencies() -> None:
    m = models.load(CONFIGS / "Qwen--Qwen3-8B_config.json")
    hw = hardware.preset("h100-sxm-8x")
    shape = StepShape.decode(np.array([32.0]), 2000.0, np.array([32.0]))
    f = step_floors(m, hw, ServeLayout(1), Workload(1, 2), shape, {"gemm": 145}, [])["gemm"]
    # Qwen3-8B's weights but the embedding table: 7.6 B params x 2 B over 3.35 TB/s
    assert f.us == pytest.approx(7.57e9 * 2 / 3.35e12 * 1e6, rel=0.02)
    assert "3,350 GB/s" in f.assumption and "989 TFLOPS" in f.assumption


def test_a_category_the_model_has_no_bytes_for_gets_its_launch_floor() -> None:
    m = models.load(CONFIGS / "Qwen--Qwen3-8B_config.json")
    hw = hardware.preset("h100-sxm-8x")
    shape = StepShape.decode(np.array([1.0]), 0.0, np.array([1.0]))
    got = step_floors(m, hw, ServeLayout(1), Workload(1, 2), shape,
                      {"norm": 73, "attention": 600, "moe": 0}, [])  # fmt: skip
    assert got["norm"].us == 73 * KERNEL_FLOOR_US and "norms" in got["norm"].assumption
    # 600 launches outweigh one sequence's empty KV cache
    assert got["attention"].us == 600 * KERNEL_FLOOR_US
    assert "above the bytes / FLOPs floor" in got["attention"].assumption
    assert "moe" not in got  # no kernels in the step: no floor


def _allreduce(curves: list[CommCurve]) -> tuple[float, str]:
    m, hw = models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x")
    shape = StepShape.decode(np.array([1.0]), 1000.0, np.array([1.0]))
    f = step_floors(m, hw, ServeLayout(tp=8), Workload(1, 2), shape, {"allreduce": 127}, curves)
    return f["allreduce"].us / 127, f["allreduce"].assumption


def test_a_collective_takes_the_hosts_curve_else_the_spec_sheet() -> None:
    per_call, text = _allreduce([])  # spec: 27 us at 1 B, + the rest x 2 x 7/8 over 55 GB/s
    assert per_call == pytest.approx(27.0 + 14335 * 1.75 / 55e9 * 1e6, rel=1e-9)
    assert "127 calls" in text and "14.3 KB" in text and "spec sheet" in text
    gpu = {"gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}  # the host's GPUs
    nccl = CommCurve("all_reduce", 8, (8192.0, 65536.0), (40.0, 60.0), "measured", "run c1", **gpu)
    per_call, text = _allreduce([nccl])
    assert 40.0 < per_call < 60.0 and "run c1" in text
    fast = CommCurve("all_reduce_fast", 8, (8192.0, 65536.0), (12.0, 20.0), "measured", "run c2",
                     **gpu)  # fmt: skip
    per_call, text = _allreduce([nccl, fast])  # the engine may run either: the faster is the floor
    assert 12.0 < per_call < 20.0 and "run c2" in text


def test_the_reference_allreduce_floor_and_headroom() -> None:
    """127 AllReduces of one token's 14,336 B on the published NCCL curve of these GPUs
    (26.7 us at 8 KB, 27.0 us at 16 KB): 3.42 ms of the published 11.17 ms."""
    fl = reference.allreduce_floor()
    assert (fl.calls, fl.message_bytes, fl.measured_ms) == (127, 14336.0, 11.17)
    assert 26.7 < fl.per_call_us < 27.0
    assert fl.floor_ms == pytest.approx(127 * fl.per_call_us / 1e3)
    assert fl.headroom_ms == pytest.approx(11.17 - fl.floor_ms)
    assert 7.7 < fl.headroom_ms < 7.8


def test_the_reference_preset_prints_its_allreduce_floor() -> None:
    def planner(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "planner", "--preset", reference.NAME, *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert res.returncode == 0, res.stderr
        return res.stdout

    assert "is above the PCIe latency floor" in planner()
    assert "at most 7.75 ms (69%) of the published 11.17 ms" in planner()
    data = json.loads(planner("--json"))["published"]["allreduce_floor"]
    assert data["calls"] == 127 and data["headroom_ms"] == pytest.approx(7.75, abs=0.01)


def test_mi300x_is_a_known_gpu_by_the_name_traces_record() -> None:
    hw = hardware.from_gpu_name("AMD Instinct MI300X", 1, "trace")
    assert hw is not None and hw.name == "MI300X"
    assert (hw.mem_bandwidth_gbps, hw.bf16_tflops, hw.fp4_tflops) == (5300, 1307.4, 0.0)
    assert hardware.from_gpu_name("AMD Instinct MI250X", 1, "trace") is None


def test_a_cpu_only_run_gets_no_floors() -> None:
    """A store's booleans arrive as numpy's: a CPU-only run (``profile`` over gloo) is named."""
    from planner.floor_inputs import facts_from_row, resolve
    from planner.floor_report import build

    facts = facts_from_row({"run_id": "r1", "has_gpu": np.bool_(False), "world_size": 2})
    assert not facts.has_gpu
    report = build(resolve(facts), [{"rank": 0, "step": 0, "wall_us": 100.0}],
                   [{"rank": 0, "step": 0, "category": "gemm", "calls": 4, "total_us": 60.0}])
    top = report.to_json()
    assert top["categories"]["gemm"]["floor_us_per_step"] is None
    assert top["step"]["floor_us"] is None and "CPU-only" in top["missing"][0]
