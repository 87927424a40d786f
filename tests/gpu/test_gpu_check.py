"""scripts/gpu-check.sh: its dry run lists every check, a host without GPUs gets one FAIL
line and a report, and its verifier judges real stores (a gloo comm run, real CUDA traces
from ../shared/fixtures) the way it will on a GPU host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, ROOT, run_cli

SCRIPT = ROOT / "scripts" / "gpu-check.sh"
VERIFY = ROOT / "scripts" / "gpu_check_verify.py"
HTA = FIXTURES / "traces" / "hta"
ONE_GPU = ["gpu", "comm-eager", "comm-graph", "comm-default", "profile", "trace", "floor",
           "doctor"]
MULTI = ["comm-multi-eager", "comm-multi-graph", "comm-visible", "profile-tp2", "trace-tp2"]


def _script(*args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})  # fmt: skip


def test_dry_run_lists_every_check(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _script("--dry-run", str(out))
    assert res.returncode == 0, res.stderr
    names = [line.split()[0] for line in res.stdout.splitlines()
             if line and not line.startswith((" ", "#"))]  # fmt: skip
    assert names == ONE_GPU[:-1] + MULTI + ["doctor"]
    assert "--no-graph" in res.stdout and "--graph" in res.stdout
    assert "env LOCAL_RANK=0" in res.stdout and "CUDA_VISIBLE_DEVICES=0,1" in res.stdout
    assert "--device cuda" in res.stdout and "doctor --json --expect-gpus" in res.stdout
    assert not out.exists()  # a dry run writes nothing
    one = _script("--dry-run", str(out), GPU_CHECK_GPUS="1")
    assert [ln.split()[0] for ln in one.stdout.splitlines()
            if ln and not ln.startswith((" ", "#"))] == ONE_GPU  # fmt: skip
    assert "budget 480s" in one.stdout
    assert _script().returncode == 2


def test_a_host_without_gpus_fails_with_one_line_and_a_report(tmp_path: Path) -> None:
    res = _script(str(tmp_path / "out"), GPU_CHECK_GPUS="0")
    assert res.returncode == 1
    assert res.stdout.strip().splitlines()[-1].startswith("FAIL  torch sees no CUDA device")
    report = (tmp_path / "out" / "gpu-check-report.txt").read_text()
    assert "Stepscope gpu-check" in report and "FAIL" in report


def _verify(*args: str) -> tuple[int, str]:
    res = subprocess.run([sys.executable, str(VERIFY), *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    return res.returncode, res.stdout.strip()


def test_verifier_judges_a_real_comm_run(tmp_path: Path, store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--json", "--ops", "all_reduce", "--tokens", "1,2",
                  "--hidden", "32", "--iters", "3", "--warmup", "1")  # fmt: skip
    assert res.code == 0, res.stderr
    summary = tmp_path / "comm.out"
    summary.write_text(res.stdout)
    code, line = _verify("comm", str(summary), str(store_path), "eager")
    assert code == 0 and "2 points" in line and "nccl-tests-style" in line, line
    code, line = _verify("comm", str(summary), str(store_path), "graph")
    assert code == 1 and "graph_mode is False" in line
    code, line = _verify("comm", str(summary), str(store_path), "eager:2")
    assert code == 1 and "expected 2 distinct" in line


@pytest.mark.skipif(not HTA.is_dir(), reason="tests/fixtures/traces/hta is not present")
def test_verifier_checks_real_cuda_kernel_names(tmp_path: Path, store_path: Path) -> None:
    """Two ranks of a real training job (HolisticTraceAnalysis tests/data @ f4d0062):
    ncclKernel_AllReduce/AllGather and cuBLAS/CUTLASS GEMMs, ingested by the trace CLI."""
    res = run_cli(store_path, "trace", "--json", str(HTA / "sampled_rank-0.json.gz"),
                  str(HTA / "sampled_rank-1.json.gz"))  # fmt: skip
    assert res.code == 0, res.stderr
    out = tmp_path / "trace.out"
    out.write_text(res.stdout)
    code, line = _verify("trace", str(out), str(store_path), "allreduce,allgather")
    assert code == 0, line
    code, line = _verify("trace", str(out), str(store_path), "allreduce,sampling")
    assert code == 1 and "sampling" in line
    bogus = tmp_path / "none.out"
    bogus.write_text(json.dumps({"run_id": "no-such-run"}) + "\n")
    code, line = _verify("trace", str(bogus), str(store_path), "")
    assert code == 1 and "no kernels" in line


# Qwen3-8B's shape (huggingface.co/Qwen/Qwen3-8B config.json), the model of TraceLens's
# SGLang decode trace on one MI300X.
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
            "torch_dtype": "bfloat16", "tie_word_embeddings": False}  # fmt: skip


def test_verifier_judges_a_real_gpu_step_against_its_floors(tmp_path: Path,
                                                             store_path: Path) -> None:  # fmt: skip
    """A real SGLang decode trace (TraceLens tests/traces, MI300X) through trace and floor, as
    the floor check runs it on the profile's run: its GPU resolves from the trace's name, its
    model from --model here (the profile run records its shape); without a model, one line."""
    trace = FIXTURES / "traces" / "tracelens" / "sglang_qwen3_8b_decode.json.gz"
    res = run_cli(store_path, "trace", "--json", str(trace))
    assert res.code == 0, res.stderr
    run_id = res.json["run_id"]
    config = tmp_path / "config.json"
    config.write_text(json.dumps(QWEN3_8B))
    out = tmp_path / "floor.out"
    res = run_cli(store_path, "floor", "--json", "--model", str(config), run_id)
    assert res.code == 0, res.stderr
    out.write_text(res.stdout)
    code, line = _verify("floor", str(out), str(store_path), "")
    assert code == 0 and "gemm" in line and "attention" in line, line
    bare = run_cli(store_path, "floor", "--json", run_id)
    out.write_text(bare.stdout)
    code, line = _verify("floor", str(out), str(store_path), "")
    assert code == 1 and line.startswith("model:"), line
    # a category faster than its floor is a wrong floor: the check fails naming it
    data = json.loads(res.stdout.splitlines()[-1])
    data["categories"]["gemm"]["measured_us_per_step"] = 0.5 * data["categories"]["gemm"][
        "floor_us_per_step"]  # fmt: skip
    out.write_text(json.dumps(data) + "\n")
    code, line = _verify("floor", str(out), str(store_path), "")
    assert code == 1 and "measured below the floor: gemm" in line, line
