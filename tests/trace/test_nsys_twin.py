"""Issue 43 item 2: an nsys export means what the Kineto trace of the same work means.

Real Kineto traces with what the real nsys exports lack - NCCL (HTA's two ranks of a
128-rank job: all_to_all as SendRecv, AllReduce, AllGather) and a CUDA/HIP graph (vLLM's
full-graph decode step on MI300X: 425 kernels from one hipGraphLaunch) - are written again
in the nsys 2024.5 schema (tests/trace/nsys_twin.py) and both imports are compared:
categories, steps, per-rank figures, step anatomy, the run-vs-run diff and the policy
check. Times go through integer nanoseconds in the export, so sums may differ by up to
1 ns per event.
"""

from __future__ import annotations

import pytest

from collectors.trace.ingest import ingest_traces
from planner.api import check_kernels, load_policy
from store.location import resolve
from store.queries import policy as qp
from store.queries import trace as qt
from tests.helpers import run_cli
from tests.trace.conftest import fixture
from tests.trace.nsys_twin import write_twin

HTA = ("hta/sampled_rank-0.json.gz", "hta/sampled_rank-1.json.gz")
GRAPH = ("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz",)


def _same(kineto: dict, nsys: dict, events: int) -> None:
    """The summaries agree: every count exactly, every time to 1 ns per event."""
    ns = pytest.approx
    tol = 1e-3 * events
    for key in ("ranks", "steps", "step_source", "gpu_events", "graph_mode", "partial"):
        assert kineto[key] == nsys[key], key
    for cat, got in kineto["categories"].items():
        assert nsys["categories"][cat]["calls"] == got["calls"], cat
        assert nsys["categories"][cat]["total_us"] == ns(got["total_us"], abs=tol), cat
    assert nsys["outside_steps"].keys() == kineto["outside_steps"].keys()
    assert {c: {s: v["calls"] for s, v in per.items()} for c, per in nsys["comm_sources"].items()} \
        == {c: {s: v["calls"] for s, v in per.items()} for c, per in kineto["comm_sources"].items()}  # fmt: skip
    for rank, figures in kineto["per_rank"].items():
        for key, value in figures.items():
            assert nsys["per_rank"][rank][key] == ns(value, abs=tol), (rank, key)


def _steps(res) -> list[tuple]:
    rows = res.tables["trace_steps"].to_arrow().to_pylist()
    return [(r["rank"], r["step"], r["name"], r["source"], r["wall_us"], r["busy_us"]) for r in rows]


@pytest.mark.parametrize(("rels", "one_file"), [(HTA, False), (HTA, True), (GRAPH, True)],
                         ids=["nccl-file-per-rank", "nccl-one-export", "cuda-graph"])  # fmt: skip
def test_a_kineto_trace_and_its_nsys_twin_give_the_same_breakdown(tmp_path, rels, one_file):
    kineto_files = [fixture(r) for r in rels]
    if one_file:
        twins = [write_twin(kineto_files, tmp_path / "report1.sqlite")]
    else:  # one export per rank, named as the Kineto files are (rank in the name)
        twins = [write_twin([f], tmp_path / (f.name.split(".")[0] + ".sqlite"))
                 for f in kineto_files]  # fmt: skip
    kineto, nsys = ingest_traces(kineto_files), ingest_traces(twins)
    events = kineto.summary["gpu_events"]
    assert events > 400
    _same(kineto.summary, nsys.summary, events)
    for a, b in zip(_steps(kineto), _steps(nsys), strict=True):
        assert a[:4] == b[:4] and b[4:] == pytest.approx(a[4:], abs=1e-3 * events)
    k_ranks = kineto.tables["trace_ranks"].to_arrow().to_pylist()
    n_ranks = nsys.tables["trace_ranks"].to_arrow().to_pylist()
    for a, b in zip(k_ranks, n_ranks, strict=True):
        for key in ("kernels", "graph_launches", "graph_kernels", "graph_moe_relabelled",
                    "outside_calls", "steps", "step_source", "has_gpu"):  # fmt: skip
            assert a[key] == b[key], key
    if one_file and len(rels) > 1:  # one export of the whole job: a rank per GPU, in order
        assert [r["rank_source"] for r in n_ranks] == ["device", "device"]
    if rels == GRAPH:
        assert n_ranks[0]["graph_kernels"] > 400 and nsys.summary["graph_mode"] is True


def test_steps_without_step_ranges_come_from_capture_ranges(tmp_path):
    """No NVTX step range and no graph launch per step: one step per cudaProfilerStart..
    Stop range that launched GPU work (the trace's time cut in thirds: the middle third
    of this training step launches nothing); every GPU event still counted once."""
    twin = write_twin([fixture(HTA[0])], tmp_path / "r.sqlite", annotations=False,
                      capture_ranges=3)  # fmt: skip
    res = ingest_traces([twin])
    s = res.summary
    assert (s["steps"], s["step_source"]) == (2, "capture_range")
    assert any("1 step(s) launched no GPU work" in w for w in res.warnings)
    assert sum(v["calls"] for v in s["categories"].values()) == s["gpu_events"] == 1204
    assert s["outside_steps"] == {}
    whole = ingest_traces([write_twin([fixture(HTA[0])], tmp_path / "w.sqlite",
                                      annotations=False)]).summary  # fmt: skip
    assert (whole["steps"], whole["step_source"]) == (1, "capture_range")


def test_a_graph_run_without_step_ranges_steps_by_its_graph_launch(tmp_path):
    twin = write_twin([fixture(GRAPH[0])], tmp_path / "g.sqlite", annotations=False,
                      capture_ranges=2)  # fmt: skip
    s = ingest_traces([twin]).summary
    assert (s["steps"], s["step_source"]) == (1, "graph_launch")


def test_the_diff_and_the_policy_read_an_nsys_run_as_its_kineto_twin(tmp_path):
    """The Kernel page's run-vs-run diff between a Kineto run and the nsys run of the same
    work is zero in every category; the policy check finds the same things in both."""
    store = tmp_path / "s.duckdb"
    kineto = fixture(HTA[0])
    twin = write_twin([kineto], tmp_path / "sampled_rank-0.sqlite")
    a = run_cli(store, "trace", str(kineto), "--json")
    b = run_cli(store, "trace", str(twin), "--json")
    assert a.code == 0 and b.code == 0, a.stderr + b.stderr
    loc = resolve(str(store))
    diff = qt.compare_categories(loc, a.json["run_id"], b.json["run_id"])
    assert len(diff) > 5
    assert diff["delta_us_per_step"].abs().max() < 1.0  # us per step, over ~600 events
    assert (diff["a_calls_per_step"].fillna(0) == diff["b_calls_per_step"].fillna(0)).all()
    verdicts = []
    for run in (a.json["run_id"], b.json["run_id"]):
        rows = qp.policy_kernel_rows(loc, run_id=run).to_dict("records")
        found = check_kernels(rows, load_policy(), None, None)
        verdicts.append(sorted((f.rule_id, f.level, f.check, f.kernel, f.calls) for f in found))
    assert verdicts[0] == verdicts[1] and verdicts[0], verdicts
