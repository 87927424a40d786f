from __future__ import annotations

from pathlib import Path

import pytest

# Fixtures that start a service (PostgreSQL, an S3 server, Chromium): a test that uses one,
# directly or through another fixture, is marked ``service`` and left out of the quick tier
# (``scripts/test.sh --quick``).
SERVICE_FIXTURES = frozenset({"pg", "s3", "browser"})
# Files each of which took 14 s or more of one worker in a full run, or 15 s in the quick tier
# (docs/benchmarks.md, The test suite): many CLI subprocesses, real profiles and process
# groups, whole-fixture fits.
# Marked ``slow``: the full run has them, the quick tier's development loop does not.
SLOW_FILES = frozenset({
    "tests/collectors/test_check.py", "tests/collectors/test_relabel.py",
    "tests/profile/test_profile.py", "tests/fitting/test_serving_fit.py",
    "tests/comm/test_comm.py", "tests/gpu/test_gpu_check.py",
    "tests/trace/test_floors_fixtures.py", "tests/trace/test_floor_cli.py",
    "tests/trace/test_cli.py", "tests/trace/test_truth.py", "tests/trace/test_context.py",
    "tests/trace/test_split.py", "tests/planner/test_one_model.py",
    "tests/planner/test_hosts_cli.py", "tests/planner/test_calibrate_from_store.py",
    "tests/planner/test_cli.py", "tests/planner/test_expert_load.py",
    "tests/planner/test_predict.py", "tests/vllm/test_profile.py",
    "tests/vllm/test_model_config_recorded.py", "tests/vllm/test_hostile_results.py",
    "tests/sglang/test_metrics_profile.py", "tests/expert_load/test_import.py",
    "tests/benchmarks/test_scale_smoke.py", "tests/pages/test_tradeoff_page.py",
    "tests/planner/test_queries_planner.py", "tests/planner/test_measured_csv.py",
    "tests/collectors/test_terminal_text.py", "tests/planner/test_plan_model.py",
    "tests/trace/test_nsys.py", "tests/planner/test_honest.py",
})  # fmt: skip


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh embedded store location (the file is created by the first commit)."""
    return tmp_path / "store" / "stepscope.duckdb"


def pytest_report_header() -> list[str]:
    """Name the versions this run tested against (the log is then enough to reproduce it)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("duckdb", "streamlit", "plotly", "pandas", "pyarrow", "torch", "playwright"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ["stepscope deps: " + ", ".join(found)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs a service (see SERVICE_FIXTURES) as ``service`` and those of
    SLOW_FILES as ``slow``, then run
    the heaviest files first: browser files, then service or slow ones, then the rest, each
    group in collection order. With both cores busy (scripts/test.sh: xdist, one file per
    worker, --no-loadscope-reorder) the many small files then fill in at the end instead of
    one long file running alone."""
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.service)
        if item.nodeid.split("::")[0] in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    rank: dict[str, int] = {}  # per file: 0 browser, 1 service or slow, 2 the rest
    first: dict[str, int] = {}  # per file: where its first test was collected
    for i, item in enumerate(items):
        file, marks = item.nodeid.split("::")[0], {m.name for m in item.iter_markers()}
        here = 0 if "e2e" in marks else 1 if marks & {"service", "slow"} else 2
        rank[file] = min(here, rank.get(file, 2))
        first.setdefault(file, i)
    position = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (rank[it.nodeid.split("::")[0]], first[it.nodeid.split("::")[0]],
                               position[id(it)]))  # fmt: skip
