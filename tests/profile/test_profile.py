"""``python -m collectors profile``: a real 2-rank gloo run under torch.profiler, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import query, run_cli

# Small but real: 2 layers, 2 profiled steps (the defaults are only a little larger).
QUICK = ("--layers", "2", "--steps", "2", "--batch", "4", "--context", "64")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> tuple[Path, dict, Path]:
    tmp = tmp_path_factory.mktemp("profile")
    store, keep = tmp / "stepscope.duckdb", tmp / "traces"
    result = run_cli(store, "profile", "--json", "--label", "tp2", "--keep-traces", str(keep),
                     *QUICK)  # fmt: skip
    assert result.code == 0, result.stderr
    return store, result.json, keep


def test_profile_commits_both_ranks(profiled) -> None:
    store, summary, _ = profiled
    assert summary["committed"] is True and summary["ranks"] == [0, 1]
    assert summary["steps"] == 2 and summary["partial"] is False
    assert summary["backend"] == "gloo" and summary["tp"] == 2
    rows = query(store, "SELECT rank, rank_source, world_size, backend, steps FROM trace_ranks "
                 "WHERE run_id = ? ORDER BY rank", [summary["run_id"]])  # fmt: skip
    assert [r[0] for r in rows] == [0, 1]
    assert all(r[2] == 2 and r[3] == "gloo" and r[4] == 2 for r in rows), rows
    run = query(store, "SELECT verb, label, status, args FROM runs WHERE run_id = ?",
                [summary["run_id"]])[0]  # fmt: skip
    assert run[:3] == ("profile", "tp2", "ok")
    args = json.loads(run[3])
    assert args["preset"] == "kimi-k2.5" and args["backend"] == "gloo" and args["tp"] == 2
    assert args["batch"] == 4 and args["steps"] == 2 and args["model"]["attention"] == "mla"


def test_profile_steps_are_profiler_steps_with_the_designed_categories(profiled) -> None:
    store, summary, _ = profiled
    cats = summary["categories"]
    for expected in ("moe", "attention", "allreduce", "gemm", "allgather"):
        assert cats.get(expected, {}).get("calls", 0) > 0, (expected, cats)
    steps = query(store, "SELECT DISTINCT source, name FROM trace_steps WHERE run_id = ? "
                  "ORDER BY name", [summary["run_id"]])  # fmt: skip
    assert {s[0] for s in steps} == {"profiler_step"}
    assert all(name.startswith("ProfilerStep#") for _, name in steps)
    # Two layers: one AllReduce after attention and one after the MoE, per layer and rank.
    per_step = query(store, "SELECT rank, step, calls FROM trace_step_categories "
                     "WHERE run_id = ? AND category = 'allreduce'", [summary["run_id"]])  # fmt: skip
    assert len(per_step) == 4 and {c for _, _, c in per_step} == {4}, per_step


def test_kept_traces_are_named_by_rank(profiled) -> None:
    _, summary, keep = profiled
    names = sorted(p.name for p in (keep / summary["run_id"]).iterdir())
    assert names == [f"stepscope_profile_rank{r}.pt.trace.json" for r in (0, 1)]


@pytest.mark.parametrize(("fault", "timeout", "expected"), [
    ("die:1", "120", "rank 1 died with exit code 17"),
    ("hang:1", "12", "rank 1 did not finish within 12 s (hung; killed)"),
])  # fmt: skip
def test_dead_or_hung_rank_fails_and_commits_nothing(
    store_path: Path, fault: str, timeout: str, expected: str
) -> None:
    result = run_cli(store_path, "profile", "--timeout", timeout, *QUICK,
                     STEPSCOPE_PROFILE_FAULT=fault)  # fmt: skip
    assert result.code == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    # One info line ("profiling ..."), then one error line; the rank's own output is not shown.
    assert len(lines) == 2 and lines[0].startswith("stepscope profile: profiling"), lines
    assert expected in lines[1] and lines[1].endswith("nothing was committed"), lines[1]
    assert not store_path.exists(), "a failed profile must not create or touch the store"


@pytest.mark.parametrize(("flags", "code", "needle"), [
    (("--tp", "x"), 2, "--tp"),
    (("--preset", "gpt-9"), 2, "--preset"),
    (("--scale", "3"), 1, "--scale 3.0: must be in (0, 1]"),
    (("--tp", "0"), 1, "--tp 0: must be between 1 and 64"),
    (("--steps", "5", "--context", "4"), 1, "--context 4: must cover warm-up + steps"),
])  # fmt: skip
def test_bad_flags_exit_with_one_line(store_path: Path, flags, code, needle) -> None:
    result = run_cli(store_path, "profile", *flags)
    lines = result.stderr.strip().splitlines()
    assert result.code == code and needle in lines[-1], result.stderr
    # Usage errors print argparse's usage then one error line; input errors one line only.
    assert "error:" in lines[-1] if code == 2 else len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and not store_path.exists()


def test_cuda_without_gpus_is_one_line(store_path: Path) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("this machine has the GPUs: --device cuda is valid here")
    result = run_cli(store_path, "profile", "--device", "cuda")
    assert result.code == 1 and "--device cuda: 2 ranks need 2 GPUs" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_slow_start_does_not_eat_the_steps_budget(store_path: Path) -> None:
    """Start-up (CUDA/NCCL/CUPTI init, weights) has its own deadline: a rank 18 s late to
    start still passes --timeout 15, which counts only once every rank is ready."""
    result = run_cli(store_path, "profile", "--json", "--timeout", "15", *QUICK,
                     STEPSCOPE_PROFILE_FAULT="slowstart:1:18")  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.json["ranks"] == [0, 1]


def test_a_rank_stuck_in_start_up_is_named(store_path: Path) -> None:
    result = run_cli(store_path, "profile", "--startup-timeout", "6", *QUICK,
                     STEPSCOPE_PROFILE_FAULT="slowstart:1:120")  # fmt: skip
    assert result.code == 1
    assert "rank 1 did not start within --startup-timeout 6 s" in result.stderr
    assert not store_path.exists()
