"""Interval maths, step detection and whole-file ingest on real and hand-built traces."""

from __future__ import annotations

import csv
import logging

import numpy as np
import pytest

from collectors.core.errors import InputError
from collectors.trace import metrics, steps
from collectors.trace.ingest import ingest_traces, rank_from_name
from tests.trace.conftest import fixture, gpu_union
from tests.trace.synth import TraceBuilder, decode_step_trace


def test_union_within_and_exposed():
    u = metrics.union(np.array([0.0, 5, 2, 20]), np.array([4.0, 8, 6, 30]))
    assert list(u.start) == [0, 20] and list(u.end) == [8, 30] and u.total == 18
    assert list(u.within(np.array([3.0, 0]), np.array([25.0, 100]))) == [10, 18]
    comm = metrics.union(np.array([0.0, 10]), np.array([10.0, 20]))
    compute = metrics.union(np.array([5.0]), np.array([12.0]))
    busy = metrics.union(np.array([0.0, 30.0]), np.array([20.0, 40.0]))
    t = metrics.rank_times(busy, comm, compute)
    assert (t.busy_us, t.idle_us, t.span_us, t.comm_us, t.exposed_comm_us) == (30, 10, 40, 20, 13)


def test_containing_picks_the_innermost_interval():
    s, e = np.array([0.0, 2.0, 10.0]), np.array([9.0, 4.0, 12.0])
    got = metrics.containing(s, e, np.array([1, 2, 3]), np.array([3.0, 5.0, 11.0, 20.0]))
    assert list(got) == [2, 1, 3, -1]


@pytest.mark.parametrize(("name", "expected"), [
    ("execute_context_2(900)_generation_30(30)", (900, 30, 2, 30)),
    ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)",
     (0, 32, 0, 32)),
    ("execute_new_3_cached_61", (None, None, 3, 61)),
])  # fmt: skip
def test_vllm_step_names_both_generations(name, expected):
    (step,) = steps.annotated_steps([(name, 0.0, 10.0, 1)])
    got = (step.context_tokens, step.generation_tokens, step.context_requests,
           step.generation_requests)  # fmt: skip
    assert step.source == "vllm" and got == expected


def test_step_sources_in_order():
    cpu = [("ProfilerStep#7", 0.0, 5.0, 1), ("step[DECODE bs=8]", 1.0, 2.0, 1)]
    (s,) = steps.annotated_steps(cpu)
    assert (s.source, s.cpu_start, s.cpu_end) == ("profiler_step", 0.0, 5.0)
    (s,) = steps.annotated_steps(cpu[1:])
    assert s.source == "sglang"


def test_gap_steps_split_at_long_idle():
    u = metrics.union(np.array([0.0, 12, 24, 1000, 1012]), np.array([10.0, 22, 34, 1010, 1022]))
    got = steps.gap_steps(u.start, u.end)
    assert [(s.cpu_start, s.cpu_end) for s in got] == [(0, 34), (1000, 1022)]


def test_h100_step_matches_tracelens_and_the_rank_counts_every_gpu_event():
    """TraceLens's timeline (the CSV beside the trace) covers the GPU events whose launch
    is in the trace: those of ProfilerStep#6, our step's own busy and wall. The rank's busy
    and span count every GPU event, also the 509 launched before the capture began."""
    path = fixture("tracelens/h100_qwen1.5_0.5b.json.gz")
    ref_csv = path.with_name("h100_qwen1.5_0.5b.gpu_timeline.csv")
    ref = {r["type"]: float(r["time ms"]) * 1000 for r in csv.DictReader(ref_csv.open())}
    res = ingest_traces([path])
    rank = res.tables["trace_ranks"].to_arrow().to_pylist()[0]
    (step,) = res.tables["trace_steps"].to_arrow().to_pylist()
    # first analysed event (a kernel) at 1428625731622.25 us after baseTimeNanoseconds
    assert rank["trace_start_ns"] == 1752839461731622250
    assert step["busy_us"] == pytest.approx(ref["busy_time"], rel=1e-3)
    assert step["wall_us"] == pytest.approx(ref["total_time"], rel=1e-3)
    assert rank["outside_calls"] == 509
    busy, span = gpu_union(path)
    assert (round(rank["busy_us"], 3), round(rank["span_us"], 3)) == (busy, span)
    assert rank["busy_us"] > ref["busy_time"] + 1000  # TraceLens leaves the 509 out
    assert rank["idle_us"] == pytest.approx(span - busy)


@pytest.mark.parametrize(("rel", "source", "n_steps", "present"), [
    ("tracelens/h100_qwen1.5_0.5b.json.gz", "profiler_step", 1, {"gemm", "attention"}),
    ("hta/ns_resolution_rank-0.pt.trace.json.gz", "profiler_step", 5, {"gemm", "norm"}),
    ("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz", "vllm", 1,
     {"gemm", "moe", "attention", "norm"}),
    ("tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz", "vllm", 1,
     {"gemm", "moe", "attention"}),
    ("tracelens/sglang_qwen3_8b_decode.json.gz", "vllm", 1, {"gemm", "attention", "norm"}),
])  # fmt: skip
def test_every_fixture(rel, source, n_steps, present):
    res = ingest_traces([fixture(rel)])
    steps_t = res.tables["trace_steps"].to_arrow().to_pylist()
    assert len(steps_t) == n_steps and {s["source"] for s in steps_t} == {source}
    cats = {c for c, v in res.summary["categories"].items() if v["calls"]}
    assert present <= cats
    r = res.summary["per_rank"][0]
    assert 0 < r["busy_us"] <= r["span_us"] and r["idle_us"] >= 0
    kernels = res.tables["trace_kernels"]
    assert kernels.num_rows == res.tables["trace_ranks"].to_arrow().to_pylist()[0]["kernels"]


@pytest.mark.parametrize("rel", [
    "tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz",
    "tracelens/sglang_qwen3_8b_decode.json.gz",
])  # fmt: skip
def test_skipping_cpu_ops_changes_nothing(rel, monkeypatch):
    from collectors.trace import ingest
    from collectors.trace.readers import kineto as reader

    path = fixture(rel)
    lean = ingest_traces([path])
    monkeypatch.setattr(ingest, "read_trace", lambda p: reader.read_trace(p, all_cpu_ops=True))
    full = ingest_traces([path])
    assert lean.summary == full.summary
    assert lean.tables["trace_kernel_stats"].to_arrow().equals(
        full.tables["trace_kernel_stats"].to_arrow())


def test_mi300x_graph_kernels_land_in_the_step_and_tokens_parse():
    res = ingest_traces([fixture("tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz")])
    (step,) = res.tables["trace_steps"].to_arrow().to_pylist()
    assert (step["context_tokens"], step["generation_tokens"]) == (8155, 37)
    assert (step["context_requests"], step["generation_requests"]) == (9, 37)
    steps_col = res.tables["trace_kernels"].to_arrow().column("step").to_pylist()
    assert steps_col.count(0) >= 400  # kernels run ~150 ms after the CPU annotation closed


def test_sglang_step_ranges(tmp_path):
    import gzip
    import json

    doc = json.loads(gzip.decompress(fixture("tracelens/sglang_qwen3_8b_decode.json.gz")
                                     .read_bytes()))  # fmt: skip
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not e["name"].startswith("execute_")]
    path = tmp_path / "sglang.json"
    path.write_text(json.dumps(doc))
    (step,) = ingest_traces([path]).tables["trace_steps"].to_arrow().to_pylist()
    assert step["source"] == "sglang" and step["name"] == "step[DECODE bs=32]"


def test_two_ranks_one_run_and_sendrecv_by_annotation():
    res = ingest_traces(
        [fixture("hta/sampled_rank-1.json.gz"), fixture("hta/sampled_rank-0.json.gz")]
    )
    assert res.summary["ranks"] == [0, 1] and res.summary["steps"] == 2
    ranks = res.tables["trace_ranks"].to_arrow().to_pylist()
    assert [r["rank_source"] for r in ranks] == ["distributedInfo"] * 2
    assert ranks[0]["world_size"] == 128 and ranks[0]["backend"] == "nccl"
    stats = res.tables["trace_kernel_stats"].to_arrow().to_pylist()
    sendrecv = {(s["category"], s["dtype"]) for s in stats if "SendRecv" in s["name"]}
    # the CPU-side nccl:all_to_all annotation makes SendRecv an all_to_all
    assert ("all_to_all", "i8") in sendrecv
    assert all(r["exposed_comm_us"] <= r["comm_us"] for r in ranks)


def _comm_trace(tmp_path, annotate: bool, coll_arg: str | None = None):
    b = TraceBuilder(rank=0)
    if annotate:
        b.cpu("user_annotation", "nccl:all_to_all", 90.0, 30.0)
    args = {"Collective name": coll_arg} if coll_arg else {}
    b.kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 100.0, 200.0, 10.0,
             **args)  # fmt: skip
    b.kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", 130.0, 220.0, 5.0)
    b.kernel("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL", 140.0, 230.0, 5.0, dtype="Float8_e4m3fn")
    b.kernel("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", 150.0, 205.0, 20.0)
    stats = ingest_traces([b.write(tmp_path / "c.json")]).tables["trace_kernel_stats"].to_arrow().to_pylist()
    return {s["name"].split("(")[0]: (s["category"], s["dtype"]) for s in stats}


def test_sendrecv_is_all_to_all_only_when_something_says_so(tmp_path):
    assert _comm_trace(tmp_path, False)["ncclDevKernel_SendRecv"] == ("other_comm", None)
    assert _comm_trace(tmp_path, True)["ncclDevKernel_SendRecv"][0] == "all_to_all"
    got = _comm_trace(tmp_path, False, coll_arg="all_to_all")
    assert got["ncclDevKernel_SendRecv"][0] == "all_to_all"
    assert got["ncclKernel_Broadcast_RING_LL_Sum_int8_t"] == ("other_comm", "i8")
    assert got["ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL"] == ("allreduce", "f8e4m3")
    assert got["nvjet_tst_128x64_64x4_1x2_h_bz_TNT"] == ("gemm", None)


def test_exposed_comm_and_per_step_categories(tmp_path):
    res = ingest_traces([decode_step_trace(tmp_path / "d_rank0.json")])
    r = res.tables["trace_ranks"].to_arrow().to_pylist()[0]
    # per step: gemm 20-70, attention 75-105, allreduce 110-150 -> 40 us exposed
    assert r["comm_us"] == pytest.approx(120) and r["exposed_comm_us"] == pytest.approx(120)
    # the rank's span runs from the first GPU start (1020) to the last end (3150), gaps
    # between steps included; each step's window is its own 130 us
    assert r["busy_us"] == pytest.approx(3 * 120) and r["span_us"] == pytest.approx(2130)
    walls = [s["wall_us"] for s in res.tables["trace_steps"].to_arrow().to_pylist()]
    assert walls == [130.0, 130.0, 130.0]
    cats = res.summary["categories"]
    assert cats["allreduce"] == {"calls": 3, "total_us": 120.0}
    by_step = res.tables["trace_step_categories"].to_arrow().to_pylist()
    assert {(c["step"], c["category"], c["calls"]) for c in by_step if c["category"] == "gemm"} == {
        (0, "gemm", 1), (1, "gemm", 1), (2, "gemm", 1)}  # fmt: skip
    tokens = [s["generation_tokens"] for s in res.tables["trace_steps"].to_arrow().to_pylist()]
    assert tokens == [8, 9, 10]


def test_cpu_only_trace_from_a_real_profiler_run(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x, w = torch.randn(64, 256), torch.randn(256, 256)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            y = torch.nn.functional.layer_norm(torch.relu(x @ w), (256,))
            y.to(torch.float16)
    path = tmp_path / "cpu_rank0.json"
    prof.export_chrome_trace(str(path))
    res = ingest_traces([path])
    (rank,) = res.tables["trace_ranks"].to_arrow().to_pylist()
    assert rank["has_gpu"] is False and rank["kernels"] == 0 and rank["busy_us"] > 0
    cats = {c for c, v in res.summary["categories"].items() if v["calls"]}
    assert {"gemm", "norm", "cast_quant"} <= cats
    kinds = set(res.tables["trace_kernels"].to_arrow().column("kind").to_pylist())
    assert kinds == {"cpu_op"}


def test_ranks_from_file_names_then_order(tmp_path, caplog):
    assert rank_from_name(tmp_path / "dp0_pp0_tp1_dcp0_ep0_rank1.17.pt.trace.json.gz") == 1
    assert rank_from_name(tmp_path / "host-rank-3.1234.pt.trace.json") == 3
    assert rank_from_name(tmp_path / "worker_1234.pt.trace.json") is None
    a = decode_step_trace(tmp_path / "x_rank2.json", rank=None)
    b = decode_step_trace(tmp_path / "y.json", rank=None)
    with caplog.at_level(logging.WARNING):
        res = ingest_traces([b, a])
    assert res.summary["ranks"] == [0, 2]
    sources = {r["file"].rsplit("/", 1)[-1]: r["rank_source"]
               for r in res.tables["trace_ranks"].to_arrow().to_pylist()}  # fmt: skip
    assert sources == {"x_rank2.json": "filename", "y.json": "order"}
    assert any("assumed rank 0" in w for w in res.warnings)


def test_duplicate_ranks_name_both_files(tmp_path):
    a = decode_step_trace(tmp_path / "a.json", rank=1)
    b = decode_step_trace(tmp_path / "b.json", rank=1)
    with pytest.raises(InputError, match=r"a\.json and .*b\.json both claim rank 1"):
        ingest_traces([a, b])


def test_partial_tmp_is_marked(truncated_tmp):
    res = ingest_traces([truncated_tmp])
    assert res.partial and res.summary["partial"] and "ended early" in res.message
    assert res.tables["trace_ranks"].to_arrow().to_pylist()[0]["partial"] is True


def test_benchmark_generator_output_ingests(tmp_path):
    """The benchmark's generated trace is a valid vLLM decode trace (bf16 AllReduce)."""
    from benchmarks.trace_gen import generate

    path = tmp_path / "gen_rank0.json.gz"
    n_steps = generate(path, size_mb=2, layers=2)
    res = ingest_traces([path])
    assert res.summary["steps"] == n_steps and not res.partial
    stats = res.tables["trace_kernel_stats"].to_arrow().to_pylist()
    assert {(s["category"], s["dtype"]) for s in stats if s["category"] == "allreduce"} == {
        ("allreduce", "bf16")}  # fmt: skip
    assert {"gemm", "attention", "moe", "norm"} <= {s["category"] for s in stats}


def test_unannotated_trace_splits_steps_at_idle_gaps(tmp_path):
    b = TraceBuilder(rank=0)
    for start in (0.0, 5000.0):  # two bursts of back-to-back kernels, 4.8 ms apart
        for i in range(4):
            b.kernel("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", start + i, start + 10 + 20 * i, 15.0)
    res = ingest_traces([b.write(tmp_path / "g.json")])
    steps_t = res.tables["trace_steps"].to_arrow().to_pylist()
    assert [(s["source"], s["name"]) for s in steps_t] == [("gap", "gap#0"), ("gap", "gap#1")]
    assert [s["wall_us"] for s in steps_t] == [75.0, 75.0]
    r = res.summary["per_rank"][0]
    assert r["span_us"] == pytest.approx(5075.0) and r["busy_us"] == pytest.approx(120.0)


@pytest.mark.parametrize(
    "values", [[], [3.0], [2, 2, 2], [5, 1, 5, 3, 1, 9], [0.5, -1.0, 0.5, 2.25]]
)
def test_unique_sorted_is_np_unique(values):
    from collectors.trace.npx import unique_sorted

    arr = np.array(
        values, dtype=np.float64 if any(isinstance(v, float) for v in values) else np.int64
    )
    got = unique_sorted(arr)
    assert got.dtype == arr.dtype and list(got) == list(np.unique(arr))


def test_unique_sorted_on_many_random_values():
    from collectors.trace.npx import unique_sorted

    rng = np.random.default_rng(7)
    arr = rng.integers(0, 500, size=10_000)
    assert np.array_equal(unique_sorted(arr), np.unique(arr))


def test_direct_copy_is_a_cast_only_under_a_cast_op(tmp_path):
    """An aten::to launch makes direct_copy_kernel_cuda a cast; a copy inside a collective's
    ``nccl:`` annotation (c10d copying an all_gather's output out) stays a copy."""
    copy = "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda({})>(int)"
    b = TraceBuilder(rank=0)
    b.cpu("user_annotation", "nccl:all_gather", 90.0, 40.0)
    b.kernel(copy.format("in_collective"), 110.0, 210.0, 5.0)
    b.cpu("cpu_op", "aten::to", 140.0, 20.0)
    b.kernel(copy.format("in_cast"), 145.0, 230.0, 5.0)
    stats = ingest_traces([b.write(tmp_path / "c.json")]).tables["trace_kernel_stats"]
    got = {s["name"]: s["category"] for s in stats.to_arrow().to_pylist()}
    assert got == {copy.format("in_collective"): "memory", copy.format("in_cast"): "cast_quant"}
