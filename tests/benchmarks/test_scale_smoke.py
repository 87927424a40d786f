"""The scale benchmark's generator at a tiny size: its store must be one the product reads.

Builds 11 runs x 40,960 kernel rows with benchmarks/scale/generate.py (the real migrations),
then checks the rows agree with each other, that the named queries and the policy checks
see what the generator planted, and that every dashboard page renders the benchmark's own
links without an exception. No timing here: timings live in benchmarks/ and docs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.scale.generate import build_file
from benchmarks.scale.pages import PAGE_FILES, links
from benchmarks.scale.serving import CONFIG_DIR
from tests.helpers import query
from tests.lake.conftest import lake, pg  # noqa: F401 - the lake tests' PostgreSQL fixtures

KERNEL_ROWS = 40_960


@pytest.fixture(scope="module")
def scale_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scale") / "scale.duckdb"
    report = build_file(path, runs=11, kernel_rows=KERNEL_ROWS, rank_steps=16,
                        memory_limit="1GB", threads=2)  # fmt: skip
    assert report.rows["runs"] == 11
    return path


def test_every_table_the_pages_read_has_rows(scale_store: Path) -> None:
    tables = [r[0] for r in query(scale_store, "SELECT table_name FROM information_schema.tables "
                                  "WHERE table_type = 'BASE TABLE'")]  # fmt: skip
    empty = [t for t in tables if not query(scale_store, f'SELECT count(*) FROM "{t}"')[0][0]]
    if not CONFIG_DIR.is_dir():  # the recorded configs are the real ones from ../shared
        empty.remove("serving_model_config")
    # the generator ran the real check: its findings tables fill only when a series moved
    ((message,),) = query(scale_store, "SELECT message FROM runs WHERE verb = 'check'")
    if message.startswith("0 finding(s)"):
        empty = [t for t in empty if t not in ("check_findings", "check_points")]
    assert empty == []
    verbs = {r[0] for r in query(scale_store, "SELECT DISTINCT verb FROM runs")}
    assert verbs == {"trace", "profile", "vllm-profile", "vllm-metrics", "host", "gpu", "comm",
                     "nccl-tests", "vllm-bench", "sglang-profile", "expert-load", "check"}  # fmt: skip


def test_aggregates_agree_with_the_raw_kernel_rows(scale_store: Path) -> None:
    (kernels,) = query(scale_store, "SELECT count(*) FROM trace_kernels")[0]
    assert kernels == KERNEL_ROWS
    stats = query(scale_store, "SELECT sum(calls), sum(total_us) FROM trace_kernel_stats")[0]
    cats = query(scale_store, "SELECT sum(calls), sum(total_us) FROM trace_step_categories")[0]
    out = query(scale_store, "SELECT sum(calls), sum(total_us) FROM trace_outside_categories")[0]
    raw = query(scale_store, "SELECT count(*), sum(dur_us) FROM trace_kernels")[0]
    assert stats[0] == cats[0] + out[0] == raw[0] and out[0] > 0  # every event counted once
    assert stats[1] == pytest.approx(raw[1]) and cats[1] + out[1] == pytest.approx(raw[1])
    steps = query(scale_store, "SELECT sum(busy_us) FROM trace_steps")[0][0]
    assert steps == pytest.approx(raw[1] - out[1])
    # Every step's kernels fit inside its window, in launch order on one stream.
    outside = query(scale_store, "SELECT count(*) FROM trace_kernels k JOIN trace_steps s "
                    "USING (run_id, rank, step) WHERE k.start_us < s.start_us "
                    "OR k.start_us + k.dur_us > s.start_us + s.wall_us")[0][0]  # fmt: skip
    assert outside == 0


def test_policy_checks_find_the_planted_violations(scale_store: Path) -> None:
    """FP8 AllReduce runs break the policy; quantize-then-AllReduce runs need review."""
    from planner.policy.check import load_policy
    from planner.policy.trace_check import check_kernels
    from store.location import resolve
    from store.queries import policy as queries_policy

    loc = resolve(scale_store)
    fp8_runs = {r[0] for r in query(scale_store, "SELECT DISTINCT run_id FROM "
                                    "trace_kernel_stats WHERE dtype = 'f8e4m3'")}  # fmt: skip
    quant_runs = {r[0] for r in query(scale_store, "SELECT DISTINCT run_id FROM "
                                      "trace_kernel_stats WHERE category = 'cast_quant'")}  # fmt: skip
    assert fp8_runs and quant_runs
    rows = queries_policy.policy_kernel_rows(loc).to_dict("records")
    adjacent = queries_policy.quantize_before_collectives(loc).to_dict("records")
    adjacency = {rid: [r for r in adjacent if r["run_id"] == rid]
                 for rid in queries_policy.event_runs(loc)}  # fmt: skip
    findings = check_kernels(rows, load_policy(), None, adjacency)
    assert {f.run_id for f in findings if f.level == "violation"} == fp8_runs
    assert {f.run_id for f in findings if f.level == "review"} == quant_runs


def test_every_page_renders_the_benchmark_links(scale_store: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from store import reader
    from tests.pages.apptest import new_app

    monkeypatch.setenv("STEPSCOPE_STORE", str(scale_store))
    reader.clear_cache()
    urls = links(str(scale_store))
    assert set(urls) == set(PAGE_FILES)
    for page, params in urls.items():
        at = new_app(120)
        at.switch_page(PAGE_FILES[page])
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception, f"{page}: {at.exception[0].value}"
        assert not at.error, f"{page}: {at.error[0].value}"
        # The page keeps the link's absolute run ids in its URL (nothing means "latest").
        for key in ("run", "vs", "runs", "comm", "calib"):
            if key in params:
                assert at.query_params[key] == params[key], (page, key)


def test_the_generator_fills_a_ducklake_store_the_readers_accept(lake) -> None:  # noqa: F811
    """The same generator on DuckLake (a real PostgreSQL catalog, the lake tests' fixture)."""
    from benchmarks.scale.generate import build_lake
    from store.location import resolve
    from store.queries import overview as queries
    from store.queries import trace as queries_trace

    report = build_lake(lake.url, runs=10, kernel_rows=KERNEL_ROWS, rank_steps=16,
                        memory_limit="1GB", threads=2)  # fmt: skip
    assert report.rows["trace_kernels"] == KERNEL_ROWS
    loc = resolve(lake.url)
    assert len(queries.recent_runs(loc)) == 10 + 1  # and the check the generator ran
    traces = queries_trace.trace_runs(loc)
    summary = queries_trace.category_summary(loc, traces["run_id"].iloc[0])
    assert {"allreduce", "moe", "gemm", "attention"} <= set(summary["category"])
