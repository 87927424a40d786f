"""Context the kernel name cannot give: the CPU op that launched a GPU kernel (MoE and
attention ops), and the dtype of CPU-only collectives (gloo)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.trace import taxonomy
from collectors.trace.ingest import ingest_traces
from collectors.trace.readers.kineto import read_trace
from tests.helpers import ROOT, query, run_cli
from tests.trace.synth import AR, GEMM, SILU, moe_layer_trace


def _kernels(path: Path) -> list[tuple[str, str, str | None, float]]:
    tables = ingest_traces([path]).tables
    t = tables["trace_kernels"].to_arrow()
    return list(zip(t["name"].to_pylist(), t["category"].to_pylist(), t["dtype"].to_pylist(),
                    t["start_us"].to_pylist(), strict=True))  # fmt: skip


def test_kernels_take_the_category_of_the_moe_or_attention_op_that_launched_them(tmp_path):
    path = moe_layer_trace(tmp_path / "moe_rank0.pt.trace.json")
    got = [(n, c, d) for n, c, d, _ in sorted(_kernels(path), key=lambda k: k[3])]
    assert got == [
        (GEMM, "moe", None),  # stepscope::moe
        (SILU, "moe", None),
        (AR, "allreduce", "bf16"),  # comm keeps its category inside the MoE op
        ("Memcpy DtoD (Device -> Device)", "memory", None),
        (GEMM, "gemm", None),  # launched after stepscope::moe returned
        (GEMM, "attention", None),  # vllm::unified_attention_with_output
        (GEMM, "moe", None),  # vllm::moe_forward
        (GEMM, "gemm", None),  # aten::mm
    ], got
    # GPU header: only the ops that matter were parsed, the enclosing ones among them
    raw = read_trace(path)
    ops = {raw.names[i] for i in raw.c_name}
    assert ops == {"stepscope::moe", "vllm::unified_attention_with_output",
                   "vllm::moe_forward"}, ops  # fmt: skip


def test_same_trace_through_the_cli_and_kernel_stats(tmp_path):
    path = moe_layer_trace(tmp_path / "moe_rank0.pt.trace.json.gz")
    store = tmp_path / "s.duckdb"
    result = run_cli(store, "trace", str(path), "--json")
    assert result.code == 0, result.stderr
    rows = query(store, "SELECT name, category, dtype, calls FROM trace_kernel_stats "
                 "WHERE run_id = ? AND name = ? ORDER BY category", [result.json["run_id"], GEMM])  # fmt: skip
    assert rows == [(GEMM, "attention", None, 1), (GEMM, "gemm", None, 2),
                    (GEMM, "moe", None, 2)], rows  # fmt: skip
    assert result.json["categories"]["moe"]["calls"] == 3


@pytest.mark.parametrize(("op", "expected"), [
    ("stepscope::moe", "moe"), ("vllm::moe_forward", "moe"), ("vllm.moe_forward", "moe"),
    ("vllm::moe_forward_shared", "moe"), ("vllm::outplace_fused_experts", "moe"),
    ("vllm::fused_marlin_moe", "moe"), ("vllm_dsv4::moe_forward", "moe"),
    ("trtllm::fused_moe", "moe"),
    ("stepscope::mla_attention", "attention"), ("vllm::unified_attention", "attention"),
    ("vllm::unified_attention_with_output", "attention"),
    ("vllm::unified_mla_attention_with_output", "attention"),
    ("aten::scaled_dot_product_attention", "attention"),
    ("stepscope::moe_gate", None), ("aten::mm", None), ("stepscope::all_reduce", None),
    ("my::vllm::moe_forward", None),
])  # fmt: skip
def test_enclosing_op_table(op, expected):
    assert taxonomy.enclosing_op_category(op) == expected


@pytest.mark.parametrize(("args", "expected"), [
    ({"Input type": ["float"]}, "f32"),
    ({"Input type": ["TensorList", "", "Scalar"]}, None),
    ({"Input type": ["", "c10::BFloat16", "Scalar"]}, "bf16"),
    ({"Input type": ["long int"]}, "i64"),
    ({"dtype": "Float", "Input type": ["c10::Half"]}, "f32"),
    ({"Input type": ["c10::Float8_e4m3fn"]}, "f8e4m3"),
    ({}, None),
])  # fmt: skip
def test_cpu_op_dtype_args(args, expected):
    assert taxonomy.collective_dtype("c10d::allreduce_", taxonomy.input_dtype(args)) == expected


@pytest.fixture(scope="module")
def gloo_profile(tmp_path_factory) -> tuple[Path, dict, Path]:
    """A real 2-rank gloo ``profile`` run (smallest flags), traces kept."""
    tmp = tmp_path_factory.mktemp("gloo")
    store, keep = tmp / "s.duckdb", tmp / "traces"
    result = run_cli(store, "profile", "--json", "--keep-traces", str(keep), "--layers", "1",
                     "--steps", "1", "--batch", "4", "--context", "64")  # fmt: skip
    assert result.code == 0, result.stderr
    return store, result.json, keep / result.json["run_id"]


def test_gloo_profile_collectives_have_their_dtype(gloo_profile):
    store, summary, traces = gloo_profile
    # the premise: torch writes the tensor dtype of the custom collective op in "Input type"
    doc = json.loads((traces / "stepscope_profile_rank0.pt.trace.json").read_text())
    ar = [e for e in doc["traceEvents"] if e.get("name") == "stepscope::all_reduce"]
    assert ar and all(e["args"]["Input type"] == ["float"] for e in ar)
    comm = "('allreduce', 'all_to_all', 'allgather', 'reduce_scatter', 'other_comm')"
    stats = query(store, "SELECT DISTINCT name, category, dtype FROM trace_kernel_stats "
                  f"WHERE run_id = ? AND category IN {comm} ORDER BY name", [summary["run_id"]])  # fmt: skip
    assert stats == [("stepscope::all_gather", "allgather", "f32"),
                     ("stepscope::all_reduce", "allreduce", "f32")], stats  # fmt: skip
    kernels = query(store, "SELECT DISTINCT CAST(dtype AS VARCHAR) FROM trace_kernels "
                    f"WHERE run_id = ? AND CAST(category AS VARCHAR) IN {comm}",
                    [summary["run_id"]])  # fmt: skip
    assert kernels == [("f32",)], kernels
    # compute ops carry no collective dtype
    other = query(store, "SELECT count(*) FROM trace_kernel_stats WHERE run_id = ? "
                  f"AND category NOT IN {comm} AND dtype IS NOT NULL", [summary["run_id"]])  # fmt: skip
    assert other == [(0,)]


_DIRECT = """
import sys, tempfile, torch, torch.distributed as dist
from torch.profiler import profile, ProfilerActivity
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
x, y = torch.ones(64, dtype=torch.bfloat16), torch.arange(16)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(3):
        dist.all_reduce(x)
        dist.all_gather([torch.empty_like(y)], y)
        torch.mm(torch.ones(8, 8), torch.ones(8, 8))
prof.export_chrome_trace(sys.argv[1])
dist.destroy_process_group()
"""


def test_direct_c10d_collectives_take_the_gloo_annotation_dtype(tmp_path):
    """``dist.all_reduce`` records ``c10d::allreduce_`` with ['TensorList', ...]; gloo's
    own ``gloo:all_reduce`` annotation (another thread, often after it) has the dtype."""
    path = tmp_path / "direct_rank0.pt.trace.json"
    subprocess.run([sys.executable, "-c", _DIRECT, str(path)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    got = {(n, c, d) for n, c, d, _ in _kernels(path) if c in taxonomy.COMM}
    assert got == {("c10d::allreduce_", "allreduce", "bf16"),
                   ("c10d::allgather_", "allgather", "i64")}, got  # fmt: skip
