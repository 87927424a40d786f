"""Issue 12: every GPU event counted exactly once, CUDA-graph runs, vLLM versions, step
anatomy. Graph traces are built the way Kineto writes them (tests/trace/synth.py:
``graph_decode_trace``): every kernel of a replay shares its ``cudaGraphLaunch``'s
correlation id; several launches per rank, several ranks."""

from __future__ import annotations

import gzip
import json

import pytest

from collectors.trace.ingest import ingest_traces
from store.location import resolve
from store.queries import trace as qt
from tests.helpers import query, run_cli
from tests.trace.conftest import fixture
from tests.trace.synth import (
    AR,
    GEMM,
    GRAPH_KERNELS_PER_STEP,
    TraceBuilder,
    graph_decode_trace,
    moe_layer_trace,
)  # fmt: skip

RANKS, STEPS, LAYERS = 4, 8, 3
EAGER_PER_STEP = 3  # logits GEMM, vocab AllGather, sampler top-k


@pytest.fixture
def graph_run(store_path, tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    for r in range(RANKS):
        graph_decode_trace(folder / f"host_rank{r}.123.pt.trace.json.gz", r, RANKS, STEPS, LAYERS)
    # vLLM >= 0.10 writes the frontend's CPU-only trace beside the workers'
    front = TraceBuilder(rank=None)
    front.meta.pop("deviceProperties")
    front.cpu("cpu_op", "aten::empty", 10.0, 1.0)
    front.write(folder / "host_999.async_llm.1733000000000.pt.trace.json.gz")
    res = run_cli(store_path, "trace", str(folder), "--json")
    assert res.code == 0, res.stderr
    return store_path, res


def test_graph_trace_every_kernel_in_its_step_once(graph_run):
    store, res = graph_run
    out = res.json
    assert out["ranks"] == list(range(RANKS)) and out["steps"] == STEPS
    assert "async_llm" in res.stderr and "frontend" in res.stderr  # skipped, said so
    events = RANKS * STEPS * (GRAPH_KERNELS_PER_STEP + EAGER_PER_STEP + 1)
    assert out["gpu_events"] == events
    assert sum(v["calls"] for v in out["categories"].values()) == events
    # the H2D copy launched between steps is the only thing outside them
    assert out["outside_steps"] == {"memory": {"calls": RANKS * STEPS, "total_us": 64.0}}
    per_step = query(store, "SELECT rank, step, sum(calls) FROM trace_step_categories "
                     "WHERE run_id = ? GROUP BY ALL", [out["run_id"]])  # fmt: skip
    assert len(per_step) == RANKS * STEPS
    assert {n for _, _, n in per_step} == {GRAPH_KERNELS_PER_STEP + EAGER_PER_STEP}
    # the logits AllGather runs after the step's GPU annotation ended: still in the step
    assert out["categories"]["allgather"]["calls"] == RANKS * STEPS
    assert "allgather" not in out["outside_steps"]
    counts = qt.event_counts(resolve(str(store)), out["run_id"]).iloc[0]
    assert counts["in_steps"] + counts["outside"] == counts["events"] == events


def test_graph_facts_and_expert_gemms_by_kernel_order(graph_run):
    store, res = graph_run
    out = res.json
    assert out["graph_mode"] is True
    rows = query(store, "SELECT rank, graph_launches, graph_kernels, graph_moe_relabelled "
                 "FROM trace_ranks WHERE run_id = ? ORDER BY rank", [out["run_id"]])  # fmt: skip
    assert rows == [(r, STEPS, STEPS * GRAPH_KERNELS_PER_STEP, STEPS * LAYERS * 2)
                    for r in range(RANKS)]  # fmt: skip
    # bmm_* expert GEMMs between MoE routing and finalize count as moe, not gemm
    bmm = query(store, "SELECT DISTINCT category FROM trace_kernel_stats WHERE run_id = ? "
                "AND name LIKE 'bmm_%'", [out["run_id"]])  # fmt: skip
    assert bmm == [("moe",)]
    # 3 nvjet per layer (qkv, o_proj, router) + the eager logits GEMM stay gemm
    assert out["categories"]["gemm"]["calls"] == RANKS * STEPS * (3 * LAYERS + 1)


def test_step_anatomy_in_json_store_and_per_step_query(graph_run):
    store, res = graph_run
    out = res.json
    n = RANKS * STEPS * LAYERS
    assert out["comm_sources"] == {
        "allreduce": {"attention": {"calls": n, "total_us": 4.0 * n},
                      "moe": {"calls": n, "total_us": 4.0 * n}},
        "allgather": {"logits": {"calls": RANKS * STEPS, "total_us": 4.0 * RANKS * STEPS}},
    }  # fmt: skip
    rows = qt.comm_sources_per_step(resolve(str(store)), out["run_id"])
    got = {(r["category"], r["source"]): r for r in rows.to_dict("records")}
    assert set(got) == {("allreduce", "attention"), ("allreduce", "moe"), ("allgather", "logits")}
    moe = got[("allreduce", "moe")]
    assert moe["calls_per_step"] == LAYERS and moe["us_per_step"] == 4.0 * LAYERS
    wall = query(store, "SELECT avg(wall_us) FROM trace_steps WHERE run_id = ?",
                 [out["run_id"]])[0][0]  # fmt: skip
    assert moe["pct_of_step"] == pytest.approx(100 * 4.0 * LAYERS / wall)
    view = query(store, "SELECT category, source, calls_per_step FROM v_trace_comm_sources "
                 "WHERE run_id = ? ORDER BY ALL", [out["run_id"]])  # fmt: skip
    assert view == [("allgather", "logits", 1.0), ("allreduce", "attention", 3.0),
                    ("allreduce", "moe", 3.0)]  # fmt: skip


def test_vllm_0_10_graph_trace_without_annotations_steps_by_graph_launch(tmp_path):
    path = graph_decode_trace(tmp_path / "w_rank0.pt.trace.json", 0, 1, steps=5, layers=14,
                              annotate=False)  # fmt: skip
    s = ingest_traces([path]).summary
    assert s["step_source"] == "graph_launch" and s["steps"] == 5
    assert sum(v["calls"] for v in s["categories"].values()) == s["gpu_events"]
    # every H2D copy but the one before the first launch is inside a step now
    assert s["outside_steps"] == {}  # copies land in the step launched before them


def test_vllm_0_10_execute_model_frames_are_the_steps(tmp_path):
    """vLLM 0.10-0.11 have no step annotation; with_stack=True (vLLM's default) gives the
    frames, ``gpu_worker.py(N): execute_model`` around ``gpu_model_runner.py(N): ...``."""
    b = TraceBuilder(rank=0, world_size=1)
    for i in range(3):
        t = 1000.0 + 1000 * i
        b.cpu("python_function", "vllm/v1/worker/gpu_worker.py(365): execute_model", t, 500.0)
        b.cpu("python_function", "/usr/lib/python3.12/site-packages/vllm/v1/worker/"
              "gpu_model_runner.py(1536): execute_model", t + 5, 480.0)  # fmt: skip
        b.kernel(GEMM, t + 10, t + 20, 50.0)
        b.kernel(AR, t + 20, t + 80, 40.0)
    b.kernel(GEMM, 3900.0, 3950.0, 50.0)  # launched after the last step
    s = ingest_traces([b.write(tmp_path / "w.pt.trace.json")]).summary
    assert s["step_source"] == "vllm_execute_model" and s["steps"] == 3
    assert s["outside_steps"] == {"gemm": {"calls": 1, "total_us": 50.0}}
    assert s["categories"]["gemm"]["calls"] == 4


def test_no_step_marks_at_all_falls_back_to_gaps(tmp_path):
    path = graph_decode_trace(tmp_path / "w_rank0.pt.trace.json", 0, 1, steps=3, layers=1,
                              annotate=False)  # fmt: skip
    assert ingest_traces([path]).summary["step_source"] == "gap"


def test_only_the_frontend_trace_is_one_clear_error(store_path, tmp_path):
    b = TraceBuilder(rank=None)
    b.cpu("cpu_op", "aten::empty", 10.0, 1.0)
    path = b.write(tmp_path / "h_1.async_llm.17.pt.trace.json")
    res = run_cli(store_path, "trace", str(path))
    assert res.code == 1 and "frontend" in res.stderr and "Traceback" not in res.stderr
    assert not store_path.exists()


def test_eager_collective_inside_a_moe_op_is_moe_output(tmp_path):
    """Eager traces: the CPU op around the launch names the module (moe_layer_trace launches
    an NCCL AllReduce inside ``stepscope::moe``)."""
    s = ingest_traces([moe_layer_trace(tmp_path / "m_rank0.pt.trace.json")]).summary
    assert s["comm_sources"] == {"allreduce": {"moe": {"calls": 1, "total_us": 30.0}}}


def test_eager_dense_model_attention_and_mlp_by_kernel_order(tmp_path):
    """A dense TP layer as vLLM runs it eagerly: norm, qkv GEMM, attention, o_proj GEMM,
    AllReduce (attention); norm, gate_up GEMM, SiLU, down GEMM, AllReduce (mlp); the
    vocab-parallel embedding's AllReduce first."""
    b = TraceBuilder(rank=0, world_size=2)
    b.cpu("user_annotation", "execute_context_0(0)_generation_4(4)", 900.0, 2000.0)
    seq = ["void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16>(...)",
           AR]  # fmt: skip
    for _ in range(2):
        seq += ["void vllm::rms_norm_kernel<c10::BFloat16>(...)", GEMM,
                "void flash::flash_fwd_splitkv_kernel<...>(...)", GEMM, AR,
                "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)", GEMM,
                "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(...)",
                GEMM, AR]  # fmt: skip
    for i, name in enumerate(seq):
        b.kernel(name, 1000.0 + 10 * i, 1100.0 + 10 * i, 5.0)
    s = ingest_traces([b.write(tmp_path / "d_rank0.pt.trace.json")]).summary
    ar = s["comm_sources"]["allreduce"]
    assert {k: v["calls"] for k, v in ar.items()} == {"embedding": 1, "attention": 2, "mlp": 2}


def test_cpu_only_profile_run_has_its_anatomy(tmp_path):
    """The real ``profile`` workload on gloo: per layer one attention and one MoE AllReduce,
    and the logits AllGather (collectors/profile/workload.py decode_step)."""
    store, keep = tmp_path / "s.duckdb", tmp_path / "traces"
    res = run_cli(store, "profile", "--json", "--layers", "2", "--steps", "2", "--batch", "4",
                  "--context", "64")  # fmt: skip
    assert res.code == 0, res.stderr
    src = res.json["comm_sources"]
    ranks = len(res.json["ranks"])
    steps = query(store, "SELECT count(*) FROM trace_steps")[0][0]
    assert src["allreduce"]["attention"]["calls"] == 2 * steps
    assert src["allreduce"]["moe"]["calls"] == 2 * steps
    assert src["allgather"]["logits"]["calls"] == steps
    assert ranks == 2 and keep


@pytest.mark.parametrize("rel", [
    "tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz",
    "tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz",
    "tracelens/sglang_qwen3_8b_decode.json.gz",
    "tracelens/h100_qwen1.5_0.5b.json.gz",
    "hta/sampled_rank-0.json.gz",
    "hta/ns_resolution_rank-0.pt.trace.json.gz",
])  # fmt: skip
def test_real_traces_count_every_gpu_event_once(rel):
    res = ingest_traces([fixture(rel)])
    s, t = res.summary, {name: table.to_arrow() for name, table in res.tables.items()}
    assert sum(v["calls"] for v in s["categories"].values()) == s["gpu_events"] > 0
    in_steps = sum(t["trace_step_categories"]["calls"].to_pylist())
    outside = sum(t["trace_outside_categories"]["calls"].to_pylist())
    assert in_steps + outside == len(t["trace_kernels"]) == s["gpu_events"]
    kernels = t["trace_kernels"]
    nulls = kernels["step"].null_count
    assert nulls == outside == sum(v["calls"] for v in s["outside_steps"].values())


def test_mi300x_full_graph_is_a_graph_run():
    """The real HIP-graph trace: kernels sharing the hipGraphLaunch's correlation id are
    counted as graph kernels (checked against a plain JSON load of the file)."""
    path = fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    launches = {e["args"]["correlation"] for e in doc["traceEvents"]
                if e.get("cat") == "cuda_runtime" and "GraphLaunch" in e["name"]}  # fmt: skip
    in_graph = sum(1 for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy",
                   "gpu_memset") and e["args"].get("correlation") in launches)  # fmt: skip
    res = ingest_traces([path])
    rank = res.tables["trace_ranks"].to_arrow().to_pylist()[0]
    assert res.summary["graph_mode"] is True
    assert (rank["graph_launches"], rank["graph_kernels"]) == (len(launches), in_graph) != (0, 0)
