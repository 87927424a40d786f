"""`python -m collectors check` on a real store filled with 30 nightly runs per history:
serving results through vLLM's result parser and the spool -> commit path, nccl-tests -J
files through the `nccl-tests` CLI, Kineto traces through the real importer. vLLM and NCCL
are upgraded on night 20 (host snapshots and the runs' own versions say so)."""

from __future__ import annotations

import pytest

from tests.analysis import histories as h
from tests.helpers import query, run_cli, run_in_process
from tests.lake.conftest import Lake, lake, pg  # noqa: F401 - the lake tests' PostgreSQL fixtures

UPGRADE = h.Plan(upgrade_night=20)
SWEEP = {
    64: h.Plan(step_night=20, step=0.12, seed=1),  # 12% slower from night 20
    8: h.Plan(step_night=20, step=-0.12, seed=2),  # 12% faster from night 20
    16: h.Plan(outlier_night=25, outlier=0.30, seed=3),  # one wild night
    32: h.Plan(outlier_night=30, outlier=0.30, seed=4),  # the newest night is the wild one
}
STEP = h.Plan(step_night=20, step=0.12, upgrade_night=20, seed=5)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("check")
    path = tmp / "stepscope.duckdb"
    h.serving_history(path, "gpu-a", SWEEP, UPGRADE)
    h.trace_history(path, tmp, "gpu-t", STEP)
    files = [str(h.nccl_tests_file(tmp, "gpu-n", n, STEP)) for n in range(1, 31)]
    res = run_cli(path, "nccl-tests", *files)
    assert res.code == 0, res.stderr
    return path


def _check(store, *args: str):
    # In this process (collectors.cli.main, as the child would run it): the tests read one
    # module store many times, and a fresh interpreter per call was most of their time.
    return run_in_process(store, "check", *args)


def _json(store, *args: str) -> dict:
    res = _check(store, "--json", *args)
    assert res.code in (0, 3), res.stderr
    return res.json


def test_the_step_is_reported_at_run_20_and_nowhere_else(store) -> None:
    out = _json(store, "--host", "gpu-a")
    assert out["series"] == 16  # 4 concurrencies x (TPOT, ITL, TTFT, output throughput)
    assert out["runs"] == 30
    regressed = {r["series"].split(": ")[1]: r for r in out["regressions"]}
    assert all("c=64 " in r["series"] for r in out["regressions"])
    assert set(regressed) == {"median TPOT", "median ITL", "output throughput"}
    for r in out["regressions"] + out["improvements"]:
        assert r["since_run_id"].endswith("-gpu-a-n020"), r
        assert r["runs_since"] == 11
    assert regressed["median TPOT"]["change_pct"] == pytest.approx(12, abs=3)
    assert regressed["output throughput"]["change_pct"] < -5  # higher is better: it fell
    # the outlier concurrencies (16: night 25, 32: the newest night) and TTFT say nothing
    found = out["regressions"] + out["improvements"]
    assert not [r for r in found if " c=16 " in r["series"] or " c=32 " in r["series"]]
    assert not [r for r in found if "TTFT" in r["series"]]


def test_the_version_change_at_the_step_is_named(store) -> None:
    res = _check(store, "--host", "gpu-a")
    assert res.code == 3, res.stderr
    lines = res.stdout.splitlines()
    tpot = next(line for line in lines if "c=64" in line and "median TPOT" in line)
    assert tpot.startswith("REGRESSION gpu-a serving vllm deepseek-ai/DeepSeek-V3 TP8+EP c=64 ")
    assert " ms (+" in tpot and "since run 20261120T" in tpot and "-gpu-a-n020" in tpot
    assert "changed then: vLLM 0.11.0 -> 0.11.1, NCCL 2.27.3 -> 2.28.3" in tpot
    out = _json(store, "--host", "gpu-a")
    changed = out["regressions"][0]["versions_changed"]
    assert {"what": "vLLM", "before": "0.11.0", "after": "0.11.1"} in changed


def test_an_improvement_is_reported_as_one(store) -> None:
    res = _check(store, "--host", "gpu-a")
    improved = [line for line in res.stdout.splitlines() if line.startswith("IMPROVEMENT")]
    assert len(improved) == 3 and all(" c=8 " in line for line in improved)
    tpot = next(line for line in improved if "median TPOT" in line)
    assert "(-1" in tpot  # about -12%
    # regressions come first: a reader sees what got worse before what got better
    assert res.stdout.splitlines()[0].startswith("REGRESSION")
    assert "3 regression(s), 3 improvement(s)" in res.stderr


def test_collectives_and_trace_steps_name_their_upgrade(store) -> None:
    comm = _json(store, "--host", "gpu-n")
    assert {r["metric"] for r in comm["regressions"]} == {"latency", "bus bandwidth"}
    assert len({r["since_run_id"] for r in comm["regressions"]}) == 1  # one run: night 20
    for r in comm["regressions"]:
        assert r["since"].startswith("2026-11-20T"), r  # the -J file's start/end time
        assert "all_reduce bf16" in r["series"] and "8 ranks nccl eager" in r["series"]
        assert {"what": "NCCL", "before": "2.27.3", "after": "2.28.3"} in r["versions_changed"]
    trace = _json(store, "--host", "gpu-t")
    by_metric = {r["metric"]: r for r in trace["regressions"]}
    assert set(by_metric) == {"moe per step", "step time (median)"}
    moe = by_metric["moe per step"]
    assert moe["series"] == "trace decode-bench 1 rank decode: moe per step"
    assert moe["since_run_id"].endswith("-gpu-t-n020")
    # the trace runs record no vLLM version: the host snapshot of night 20 names it
    assert {"what": "NCCL", "before": "2.27.3", "after": "2.28.3"} in moe["versions_changed"]
    assert not trace["improvements"]


def test_since_and_min_change(store) -> None:
    assert _check(store, "--since", "2026-11-19").code == 3
    late = _check(store, "--since", "2026-11-21")  # the night-20 moves are older
    assert late.code == 0, late.stdout + late.stderr
    assert late.stdout == ""
    assert _check(store, "--since", "36500d").code == 3  # an age: a hundred years back
    big = _check(store, "--min-change", "15%")
    assert big.code == 0 and big.stdout == ""
    assert _check(store, "--min-change", "8").code == 3  # percent without the sign
    out = _json(store, "--since", "2026-11-19T00:00Z", "--min-change", "5%")
    assert out["since"] == "2026-11-19T00:00:00+00:00" and out["min_change_pct"] == 5.0
    assert (
        len(out["regressions"]) == 3 + 4 + 2
    )  # serving c=64, 2 sizes x 2 collective figures, trace


def test_host_filters_and_all_hosts_together(store) -> None:
    everything = _json(store)
    assert {r["host"] for r in everything["regressions"]} == {"gpu-a", "gpu-n", "gpu-t"}
    assert everything["runs"] == 90
    only = _json(store, "--host", "gpu-t")
    assert {r["host"] for r in only["regressions"]} == {"gpu-t"}


def test_exit_codes(store, tmp_path) -> None:
    assert _check(store).code == 3  # a regression
    clean = _check(store, "--host", "gpu-a", "--min-change", "50%")
    assert clean.code == 0 and clean.stdout == ""
    assert "0 regression(s)" in clean.stderr
    for args, needle in ((("--since", "last tuesday"), "--since: 'last tuesday'"),
                         (("--min-change", "lots"), "--min-change: 'lots'"),
                         (("--min-change", "0%"), "must be above 0%"),
                         (("--min-runs", "1"), "--min-runs: 1"),
                         (("--host", "gpu-z"), "--host gpu-z: no runs")):  # fmt: skip
        res = _check(store, *args)
        assert res.code == 1, (args, res.stderr)
        assert needle in res.stderr and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and res.stdout == ""
    missing = run_cli(tmp_path / "none.duckdb", "check")
    assert missing.code == 1 and "no store at" in missing.stderr
    usage = _check(store, "--min-runs", "three")
    assert usage.code == 2 and "usage:" in usage.stderr
    assert _check(store, "--no-such-flag").code == 2


def test_the_findings_are_kept_as_a_check_run(store) -> None:
    """What the Overview and the Trends page show: every finding of the check (whatever
    --since printed), its series' level changes and every point of those series."""
    import json

    out = _json(store, "--host", "gpu-a", "--since", "2099-01-01")
    assert out["regressions"] == [] and out["committed"] is True  # --since: nothing printed
    run = out["run_id"]
    (args,) = query(store, "SELECT args FROM runs WHERE run_id = ? AND verb = 'check'", [run])[0]
    checked = json.loads(args)
    assert (checked["series"], checked["points"], checked["host"]) == (16, 480, "gpu-a")
    rows = query(store, "SELECT kind, series_id, shifts, line, versions_changed FROM "
                 "check_findings WHERE run_id = ? ORDER BY kind, series", [run])  # fmt: skip
    kinds = [r[0] for r in rows]
    assert kinds.count("regression") == 3 and kinds.count("improvement") == 3
    for kind, _series_id, shifts, line, versions in rows:
        ((index, before, after),) = json.loads(shifts)  # one level change, at night 20
        assert index == 19 and line.startswith(kind.upper()) and "vLLM 0.11.0 -> 0.11.1" in versions
        assert (after > before) == (kind == "regression" if "throughput" not in line else
                                    kind == "improvement")  # fmt: skip
    points = query(store, "SELECT series_id, count(*), min(point_run_id) FROM check_points "
                   "WHERE run_id = ? GROUP BY series_id", [run])  # fmt: skip
    assert {r[0] for r in points} == {r[1] for r in rows}
    assert all(n == 30 and first.endswith("-gpu-a-n001") for _, n, first in points)
    dry = _json(store, "--host", "gpu-a", "--dry-run")
    assert dry["committed"] is False
    assert not query(store, "SELECT 1 FROM runs WHERE run_id = ?", [dry["run_id"]])


def test_a_store_without_series_is_clean_and_names_the_collectors(tmp_path) -> None:
    path = tmp_path / "stepscope.duckdb"
    assert run_cli(path, "host").code == 0
    res = run_cli(path, "check", "--json")
    assert res.code == 0, res.stderr
    assert res.json["series"] == 0 and res.json["regressions"] == []
    assert "vllm-bench" in res.stderr and "nccl-tests" in res.stderr and "trace" in res.stderr


def test_check_reads_a_ducklake_store(lake: Lake, monkeypatch, tmp_path) -> None:  # noqa: F811
    """The series views on a DuckLake catalog (PostgreSQL): the same finding as embedded."""
    monkeypatch.setenv("STEPSCOPE_SPOOL", str(lake.spool))
    plans = {64: SWEEP[64]}
    h.serving_history(lake.url, "gpu-a", plans, UPGRADE)
    res = run_cli(tmp_path / "unused.duckdb", "check", "--store", lake.url, "--json", **lake.env())
    assert res.code == 3, res.stderr
    lines = {r["series"].split(": ")[1]: r for r in res.json["regressions"]}
    assert set(lines) == {"median TPOT", "median ITL", "output throughput"}
    assert all(r["since_run_id"].endswith("-gpu-a-n020") for r in lines.values())
    assert {"what": "vLLM", "before": "0.11.0", "after": "0.11.1"} in lines["median TPOT"][
        "versions_changed"
    ]
