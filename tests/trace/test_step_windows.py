"""Issue 20 item 1: a step's window is its own, in every mode (collectors/trace/windows.py).

CUDA-graph decode traces shaped like vLLM's (tests/trace/graph_synth.py: 4 ranks, 8 steps,
one cudaGraphLaunch per step, GPU annotations 25-29 ms long, two per step, in reverse time
order); the real MI300X graph traces, alone and replayed as 8 steps; the rules one by one."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from collectors.trace import windows
from collectors.trace.ingest import ingest_traces
from collectors.trace.steps import Step
from tests.helpers import query, run_cli
from tests.trace.conftest import fixture
from tests.trace.graph_synth import TPOT_US, graph_run
from tests.trace.synth import GEMM, TraceBuilder


def _steps_by_rank(res) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for row in res.tables["trace_steps"].to_arrow().to_pylist():
        out.setdefault(row["rank"], []).append(row)
    return out


def _assert_own_windows(steps: list[dict], span_us: float, gpu_extent_us: float) -> None:
    """No two windows of a rank overlap; the walls add up to at most the rank's span and
    to at most its GPU activity from first to last event."""
    steps = sorted(steps, key=lambda s: s["start_us"])
    for a, b in zip(steps, steps[1:], strict=False):
        assert a["start_us"] + a["wall_us"] <= b["start_us"] + 1e-6, (a, b)
    total = sum(s["wall_us"] for s in steps)
    assert total <= span_us + 1e-3 and total <= gpu_extent_us + 1e-3  # spans: rounded to ns


@pytest.mark.parametrize("placement", ["stacked", "own"])
def test_graph_run_windows_are_the_steps_own(tmp_path, placement):
    facts = graph_run(tmp_path / "t", placement=placement)
    res = ingest_traces([tmp_path / "t"])
    by_rank = _steps_by_rank(res)
    assert sorted(by_rank) == list(range(facts.ranks))
    walls = []
    for rank, steps in by_rank.items():
        assert len(steps) == facts.steps
        extent = facts.last_gpu_end[rank] - facts.first_gpu_start[rank]
        _assert_own_windows(steps, res.summary["per_rank"][rank]["span_us"], extent)
        walls += [s["wall_us"] for s in steps]
    # every window holds the step's whole GPU work (one stream) and is no longer than the
    # spacing of the steps: the built-in TPOT
    assert min(walls) >= facts.gpu_us_per_step - 1e-6 and max(walls) <= TPOT_US
    assert np.mean(walls) == pytest.approx(TPOT_US, rel=0.06)
    per_step = res.tables["trace_step_categories"].to_arrow().to_pylist()
    calls: dict[tuple[int, int], int] = {}
    for row in per_step:
        calls[(row["rank"], row["step"])] = calls.get((row["rank"], row["step"]), 0) + row["calls"]
    assert set(calls.values()) == {facts.kernels_per_step}  # each step's own events, once
    # "% of step" of MoE is its share of the GPU's time (the GPU is busy ~96% of a step)
    moe = res.summary["categories"]["moe"]["total_us"]
    pct = 100 * moe / sum(walls)
    gpu_share = 100 * facts.category_us_per_step["moe"] / facts.gpu_us_per_step
    assert pct == pytest.approx(gpu_share, abs=2.0) and pct > 30


def test_graph_run_through_the_cli_and_the_store_views(store_path, tmp_path):
    facts = graph_run(tmp_path / "t")
    res = run_cli(store_path, "trace", str(tmp_path / "t"), "--json")
    assert res.code == 0, res.stderr
    out = res.json
    assert out["graph_mode"] is True and out["steps"] == facts.steps
    for rank, r in out["per_rank"].items():
        assert r["mean_step_wall_us"] == pytest.approx(TPOT_US, rel=0.06), rank
        assert r["mean_step_wall_us"] * facts.steps <= r["span_us"] + 1e-3
    overlaps = query(store_path, "SELECT count(*) FROM (SELECT start_us, lag(start_us + wall_us) "
                     "OVER (PARTITION BY rank ORDER BY step) AS prev_end FROM v_trace_steps "
                     "WHERE run_id = ?) WHERE start_us < prev_end", [out["run_id"]])  # fmt: skip
    assert overlaps == [(0,)]
    wall, idle = query(store_path, "SELECT avg(wall_us), min(idle_us) FROM v_trace_steps "
                       "WHERE run_id = ?", [out["run_id"]])[0]  # fmt: skip
    assert wall == pytest.approx(TPOT_US, rel=0.06) and idle >= 0
    (pct,) = query(store_path, "SELECT pct_of_step FROM v_trace_categories WHERE run_id = ? "
                   "AND category = 'moe'", [out["run_id"]])[0]  # fmt: skip
    share = 100 * facts.category_us_per_step["moe"] / facts.gpu_us_per_step
    assert pct == pytest.approx(share, abs=2.0)


REAL_GRAPH = ["tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz",
              "tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz"]  # fmt: skip


def _launched_extent(doc: dict) -> tuple[float, float]:
    """First start and last end of the GPU events launched inside the step annotation,
    read with a plain JSON load (not the collector's reader)."""
    ev = doc["traceEvents"]
    (ann,) = [e for e in ev if e.get("cat") == "user_annotation"
              and e["name"].startswith("execute_")]  # fmt: skip
    a, b = ann["ts"], ann["ts"] + ann["dur"]
    corr = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime"
            and a <= e["ts"] <= b and "correlation" in e.get("args", {})}  # fmt: skip
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and e["args"].get("correlation") in corr]  # fmt: skip
    return min(e["ts"] for e in gpu), max(e["ts"] + e["dur"] for e in gpu)


@pytest.mark.parametrize("rel", REAL_GRAPH)
def test_real_graph_trace_window_is_its_launched_work(rel):
    path = fixture(rel)
    lo, hi = _launched_extent(json.loads(gzip.decompress(path.read_bytes())))
    res = ingest_traces([path])
    (step,) = res.tables["trace_steps"].to_arrow().to_pylist()
    assert step["wall_us"] == pytest.approx(hi - lo, abs=1e-3)
    _assert_own_windows([step], res.summary["per_rank"][0]["span_us"], hi - lo)


def _replayed(path: Path, out: Path, steps: int, spacing: float) -> Path:
    """The real trace's events ``steps`` times, each copy ``spacing`` us later (new
    correlation ids), plus vLLM's untrustworthy GPU annotations: two per step, 25 ms long,
    all starting near the first step's GPU start, written in reverse time order."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    base = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ann = next(e for e in base if e.get("cat") == "user_annotation")
    first_gpu = min(e["ts"] for e in base if e.get("cat") == "kernel")
    events, annotations = [], []
    for k in range(steps):
        for e in base:
            e = {**e, "ts": e["ts"] + k * spacing, "args": dict(e.get("args", {}))}
            if "correlation" in e["args"]:
                e["args"]["correlation"] += k * 10_000_000
            events.append(e)
        for stream in (0, 1):
            annotations.append({"ph": "X", "cat": "gpu_user_annotation", "name": ann["name"],
                                "pid": 0, "tid": stream, "ts": first_gpu + 80.0 * k,
                                "dur": 25_000.0, "args": {}})  # fmt: skip
    doc["traceEvents"] = events + sorted(annotations, key=lambda e: -e["ts"])
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


@pytest.mark.parametrize("rel", REAL_GRAPH)
def test_real_graph_trace_replayed_as_eight_steps(tmp_path, rel):
    one = ingest_traces([fixture(rel)])
    (single,) = one.tables["trace_steps"].to_arrow().to_pylist()
    spacing = single["wall_us"] + 1500.0
    path = _replayed(fixture(rel), tmp_path / "r_rank0.pt.trace.json.gz", 8, spacing)
    res = ingest_traces([path])
    steps = res.tables["trace_steps"].to_arrow().to_pylist()
    assert len(steps) == 8
    assert [s["wall_us"] for s in steps] == pytest.approx([single["wall_us"]] * 8, abs=1e-3)
    assert np.diff([s["start_us"] for s in steps]) == pytest.approx([spacing] * 7, abs=1e-3)
    _assert_own_windows(steps, res.summary["per_rank"][0]["span_us"], 7 * spacing + single["wall_us"])
    moe = res.summary["categories"]["moe"]["total_us"] / 8
    assert moe == pytest.approx(one.summary["categories"]["moe"]["total_us"], rel=1e-9)


# The rules one by one, on windows.py's own functions.
def _step(name: str, a: float, b: float) -> Step:
    return Step(name, "vllm", a, b)


def test_gpu_annotations_match_by_time_not_by_list_order():
    steps = [_step("s", 0.0, 10.0), _step("s", 100.0, 110.0), _step("t", 200.0, 210.0)]
    # reverse time order, one per stream, and an unrelated name
    ann = [("s", 150.0, 40.0), ("s", 150.0, 41.0), ("s", 20.0, 30.0), ("s", 20.0, 31.0),
           ("u", 210.0, 5.0)]  # fmt: skip
    got = windows.match_annotations(steps, ann)
    assert got[0].tolist() == [20.0, 50.0] and got[1].tolist() == [150.0, 190.0]
    assert np.isnan(got[2]).all()


def test_events_without_a_known_launch():
    """Launched events go by launch; the others by the launched windows, then by the GPU
    annotation of a step that launched nothing, then by the CPU range of a step with
    neither; an event in a step's CPU range that another step's work explains stays out."""
    steps = [_step("s", 0.0, 10.0), _step("s", 100.0, 110.0), _step("x", 300.0, 310.0)]
    when = np.array([5.0] + [np.nan] * 5)
    start = np.array([20.0, 22.0, 150.0, 305.0, 8.0, 16.0])
    end = start + np.array([5.0, 1.0, 5.0, 5.0, 1.0, 1.0])
    got = windows.assign(steps, when, start, end, [("s", 140.0, 30.0), ("s", 15.0, 20.0)])
    # 20: launched in step 0; 22: inside step 0's launched work; 150: step 1 launched
    # nothing, its own annotation; 305: step 2 has neither, its CPU range; 8 and 16 lie in
    # step 0's CPU range and annotation, but step 0's launched work says where it ran: out
    assert got.tolist() == [0, 0, 1, 2, -1, -1]


def test_windows_never_overlap_and_a_step_without_gpu_work_is_left_out():
    steps = [_step("a", 0.0, 10.0), _step("b", 20.0, 30.0), _step("c", 40.0, 50.0),
             _step("d", 60.0, 70.0)]  # fmt: skip
    step = np.array([0, 0, 1, 1, 3])
    start = np.array([100.0, 150.0, 120.0, 210.0, 300.0])  # b's copy starts during a's work
    end = np.array([140.0, 200.0, 125.0, 260.0, 320.0])
    kept, renumbered, win = windows.own_windows(steps, step, start, end)
    assert [s.name for s in kept] == ["a", "b", "d"]  # c launched nothing
    assert renumbered.tolist() == [0, 0, 1, 1, 2]
    assert win.tolist() == [[100.0, 200.0], [200.0, 260.0], [300.0, 320.0]]


def test_a_step_without_gpu_work_is_said_and_its_neighbours_keep_theirs(tmp_path, caplog):
    b = TraceBuilder(rank=0, world_size=1)
    for i, t in enumerate((1000.0, 2000.0, 3000.0)):
        b.cpu("user_annotation", f"execute_context_0(0)_generation_{i + 1}({i + 1})", t, 300.0)
        if i != 1:  # the middle step launches nothing
            b.kernel(GEMM, t + 10, t + 50, 100.0)
    res = ingest_traces([b.write(tmp_path / "w.pt.trace.json")])
    steps = res.tables["trace_steps"].to_arrow().to_pylist()
    assert [(s["name"][-4:], s["wall_us"]) for s in steps] == [("1(1)", 100.0), ("3(3)", 100.0)]
    assert any("1 step(s) launched no GPU work" in w for w in res.warnings), res.warnings
