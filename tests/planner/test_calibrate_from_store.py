"""``--calibrate-from-store`` on ``python -m planner`` and ``predict`` as a user runs them: a real
DuckDB store filled by the collectors' CLI (``gpu`` through the NVML stand-in of 8 RTX PRO
6000s, ``vllm-bench`` importing result files in the shape ``vllm bench serve`` writes), the
planner in a subprocess, and one-line errors for a store or file it cannot use."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.gpu.conftest import PCIE, fake_env
from tests.helpers import planner_cli, run_cli
from tests.vllm import bench_fixtures

HOST = "gpu-node-7"
SCALE = 1.25  # the host is this much slower than the fitted model says
LEVELS = (1, 2, 4, 8, 16, 32)
SWEEPS = {"tp": False, "tp_ep_dp1": True}  # layout kind -> vLLM --enable-expert-parallel
WORKLOAD = ("--isl", "1024", "--osl", "256")


def planner(*args: str) -> subprocess.CompletedProcess:
    return planner_cli(*args)


def calculator(store: Path, *extra: str, model: str = "kimi-k2.5") -> subprocess.CompletedProcess:
    return planner("--model", model, "--host-from-store", HOST, "--store", str(store), *WORKLOAD,
                   "--concurrency", "1-32", *extra)  # fmt: skip


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    return p.stderr.strip()


def store_with_sweeps(tmp: Path, sweeps: dict[str, bool]) -> tuple[Path, str]:
    """A store holding HOST's `gpu` run (8 RTX PRO 6000s through the NVML stand-in) and, per
    layout kind of ``sweeps`` (kind -> vLLM --enable-expert-parallel), a measured Kimi-K2.5
    sweep at TP=8, SCALE x the fitted model's own TPOT on this host; and the gpu run's id."""
    path = tmp / "stepscope.duckdb"
    res = run_cli(path, "gpu", "--host", HOST, "--json", **fake_env(PCIE))
    assert res.code == 0, res.stderr
    gpu_run = res.json["run_id"]
    # the model's own TPOT for the runs as they were sent: vllm bench serve, 64 prompts
    plain = calculator(path, "--json", "--bench", "vllm", "--num-prompts", "64")
    assert plain.returncode == 0, plain.stderr
    layouts = {x["kind"]: x for x in json.loads(plain.stdout)["layouts"]}
    for kind, ep in sweeps.items():
        folder = tmp / kind
        folder.mkdir()
        model_ms = {p["concurrency"]: p["tpot_ms"] for p in layouts[kind]["points"]}
        for c in LEVELS:
            obj = bench_fixtures.result(c, tp=8, ep=ep)
            obj["mean_tpot_ms"] = model_ms[c] * SCALE
            (folder / bench_fixtures.file_name(obj)).write_text(json.dumps(obj))
        res = run_cli(path, "vllm-bench", "--results", str(folder), "--host", HOST, "--json")
        assert res.code == 0, res.stderr
    return path, gpu_run


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Two measured sweeps: TP=8 and TP=8 with expert parallelism."""
    return store_with_sweeps(tmp_path_factory.mktemp("calibrate-from-store"), SWEEPS)[0]


def test_the_calculator_calibrates_on_the_stored_sweeps_and_checks_each_layout(store) -> None:
    res = calculator(store, "--calibrate-from-store", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    cal = data["calibration"]
    assert cal["applied"] and cal["points_used"] == 2 * len(LEVELS)
    assert set(cal["factors"]) == {"bandwidth", "fixed", "compute", "collectives"}
    check = cal["check"]
    assert check["kind"] == "layouts"  # two layouts measured: each held back in turn
    assert len(check["errors_before"]) == len(check["errors_after"]) == check["points"] == 12
    # the model says 1/SCALE of what was measured at every point
    assert check["errors_before"] == pytest.approx([1 / SCALE - 1] * 12, abs=0.01)
    assert check["median_abs_error_after"] < 0.25 * check["median_abs_error_before"]
    assert cal["sentence"].startswith("calibrated on 12 points of TP=8, TP=8 EP=8; checked on "
                                      "12 points of TP=8, TP=8 EP=8: 20% -> ")  # fmt: skip
    assert cal["band"].startswith("your held-back points")  # the band is the user's own error
    assert cal["carried_to_other_layouts"]
    layouts = {x["kind"]: x for x in data["layouts"]}
    for kind in SWEEPS:
        for plain, calibrated in zip(layouts[kind]["points"], layouts[kind]["calibrated_points"],
                                     strict=True):  # fmt: skip
            assert calibrated["tpot_ms"] == pytest.approx(SCALE * plain["tpot_ms"], rel=0.06)
            assert calibrated["tpot_ms_low"] <= calibrated["tpot_ms"] <= calibrated["tpot_ms_high"]
    unmeasured = layouts["tp_attn_ep_moe"]
    assert unmeasured["calibrated_points"][0]["tpot_ms"] > unmeasured["points"][0]["tpot_ms"]
    text = calculator(store, "--calibrate-from-store").stdout
    assert "Calibrated to this host's measurements: calibrated on 12 points" in text


def test_predict_uses_the_same_calibration(store) -> None:
    args = ("--model", "kimi-k2.5", "--host-from-store", HOST, "--store", str(store), "--tp", "8",
            *WORKLOAD, "--concurrency", "1,64", "--calibrate-from-store", "--json")  # fmt: skip
    res = planner("predict", *args)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    cal = data["calibration"]
    assert cal["applied"] and cal["points_used"] == 12 and cal["check"]["kind"] == "layouts"
    whole = json.loads(calculator(store, "--calibrate-from-store", "--json").stdout)
    assert cal["factors"] == whole["calibration"]["factors"]
    for p in data["points"]:
        c = p["calibrated"]
        assert c["tpot_ms"] == pytest.approx(SCALE * p["tpot_ms"], rel=0.06)
        assert c["tpot_ms_low"] <= c["tpot_ms"] <= c["tpot_ms_high"]


@pytest.mark.parametrize("command", [(), ("predict", "--tp", "8", *WORKLOAD, "--concurrency", "1")])
def test_a_store_without_runs_of_the_model_is_one_line(store, command) -> None:
    """The host's stored sweeps are of Kimi-K2.5; DeepSeek-V3 has none there."""
    res = planner(*command, "--model", "deepseek-v3", "--host-from-store", HOST, "--store",
                  str(store), "--calibrate-from-store")  # fmt: skip
    line = one_line_error(res)
    assert "--calibrate-from-store: the store has no serving sweep or profiled trace of" in line
    assert f"on host '{HOST}' (its serving runs there are of: moonshotai/Kimi-K2.5)" in line
    assert f"python -m collectors vllm-bench --results ... --host {HOST}" in line


def test_calibrate_from_store_needs_the_stored_host(store) -> None:
    res = planner("--model", "kimi-k2.5", "--host", "rtx-pro-6000-pcie-8x", "--store", str(store),
                  "--calibrate-from-store")  # fmt: skip
    assert "--calibrate-from-store: needs --host-from-store HOST" in one_line_error(res)


@pytest.mark.parametrize("body, message", [
    ("tp,dp,isl,osl,concurrency,tpot_ms\n8,1,1024,256,1,12\n", "missing column(s) ep"),
    ("tp,dp,ep,isl,osl,concurrency,tpot_ms\n8,1,1,1024,256,one,12\n",
     "line 2: concurrency 'one' is not a whole number"),
])  # fmt: skip
def test_predict_names_what_is_wrong_with_a_measured_file(tmp_path, body, message) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text(body)
    res = planner("predict", "--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--tp", "8",
                  *WORKLOAD, "--concurrency", "1", "--measured", str(csv))  # fmt: skip
    line = one_line_error(res)
    assert f"--measured {csv}" in line and message in line


def _measured(tmp_path: Path, row: str) -> subprocess.CompletedProcess:
    csv = tmp_path / "m.csv"
    csv.write_text("tp,dp,ep,isl,osl,concurrency,tpot_ms,ttft_ms\n" + row + "\n")
    return planner("predict", "--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--tp", "8",
                   *WORKLOAD, "--concurrency", "1", "--measured", str(csv), "--json")  # fmt: skip


@pytest.mark.parametrize("row, words", [
    # TPOT 0.012 "ms": 12 ms written in seconds
    ("8,1,1,1024,256,1,0.012,150", ["tpot_ms 0.012 is below the physical floor of one decode "
                                     "step, 1.2 ms (kimi-k2.5, TP=8 on 8x NVIDIA H200",
                                     "seconds, not ms? (0.012 s = 12 ms)"]),
    # TTFT in seconds
    ("8,1,1,1024,256,1,12,0.15", ["ttft_ms 0.15 is below the physical floor of its prompt's "
                                  "prefill, 19.1 ms", "seconds, not ms? (0.15 s = 150 ms)"]),
    # 0.9: in seconds or as a rate it would be plausible: both slips are named
    ("8,1,1,1024,256,1,0.9,150", ["seconds, not ms? (0.9 s = 900 ms) or tokens/s, not ms? "
                                  "(0.9 tokens/s = 1111 ms a token)"]),
])  # fmt: skip
def test_a_measured_point_physics_rules_out_is_refused_in_one_line(tmp_path, row, words) -> None:
    """Issue 57: a unit slip is refused, naming the floor (the serving model's own ops at the
    spec sheet, one sequence at the prompt's context) and the likely slip."""
    line = one_line_error(_measured(tmp_path, row))
    assert line.startswith(f"planner predict: --measured {tmp_path / 'm.csv'} line 2: ")
    for w in words:
        assert w in line, line


def test_a_plausible_measured_point_is_still_taken(tmp_path) -> None:
    res = _measured(tmp_path, "8,1,1,1024,256,1,12.5,150")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["calibration"]["points_used"] == 1


def test_stored_points_physics_rules_out_are_skipped_with_the_reason(tmp_path) -> None:
    """A stored sweep imported with its TPOTs in seconds is left out of the calibration, each
    point with the words a --measured file would get; the sound sweep is still used."""
    path, _ = store_with_sweeps(tmp_path, {"tp": False})
    folder = tmp_path / "in-seconds"
    folder.mkdir()
    for c in LEVELS:
        obj = bench_fixtures.result(c, tp=8, ep=True)
        obj["mean_tpot_ms"] = obj["mean_tpot_ms"] / 1000
        (folder / bench_fixtures.file_name(obj)).write_text(json.dumps(obj))
    res = run_cli(path, "vllm-bench", "--results", str(folder), "--host", HOST, "--json")
    assert res.code == 0, res.stderr
    p = planner("predict", "--model", "kimi-k2.5", "--host-from-store", HOST, "--store",
                str(path), "--tp", "8", *WORKLOAD, "--concurrency", "1,64",
                "--calibrate-from-store", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    cal = json.loads(p.stdout)["calibration"]
    assert cal["points_used"] == len(LEVELS)  # the TP=8 sweep only
    skipped = [n for n in cal["notes"] if ": skipped: " in n]
    assert len(skipped) == len(LEVELS)
    assert all("TP8+EP" in n and "is below the physical floor of one decode step" in n
               and "seconds, not ms?" in n for n in skipped), skipped  # fmt: skip
