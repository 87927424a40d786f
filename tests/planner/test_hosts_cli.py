"""``--host FILE`` and ``--host-from-store HOST`` as a user types them, on both planner
commands: real subprocesses, real DuckDB stores filled by ``python -m collectors gpu`` through
the NVML stand-in (the hardware boundary), exit codes and one-line messages."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.gpu.conftest import NVLINK, fake_env
from tests.helpers import planner_cli, run_cli
from tests.planner.test_host_file import H20_141, TOML

KIMI_DP8_EP8 = ("--model", "kimi-k2.5", "--tp", "1", "--dp", "8", "--ep", "--isl", "1024",
                "--osl", "1024", "--concurrency", "1,64", "--json")  # fmt: skip


def planner(*args: str, store: Path | None = None) -> subprocess.CompletedProcess:
    return planner_cli(*args, store=store)


def one_line_error(p: subprocess.CompletedProcess, prefix: str) -> str:
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), p.stderr
    return lines[0]


@dataclass
class HostStore:
    path: Path
    h20_run: str


def _spec(tmp: Path, name: str, **gpu: object) -> Path:
    spec = json.loads(NVLINK.read_text())
    spec["gpu"] = {**spec["gpu"], "name": name, **gpu}
    out = tmp / f"nvml-{name.replace(' ', '_')}.json"
    out.write_text(json.dumps(spec))
    return out


@pytest.fixture(scope="module")
def hosts_store(tmp_path_factory) -> HostStore:
    """8x H20-3e (the driver does not report the bus width: no bandwidth from NVML), 8x an
    unknown GPU, and a host with only an environment snapshot (no `gpu` run)."""
    tmp = tmp_path_factory.mktemp("hosts-store")
    store = tmp / "stepscope.duckdb"
    h20 = _spec(tmp, "NVIDIA H20-3e", memory_mib=143771,
                not_supported=["nvmlDeviceGetMemoryBusWidth"])  # fmt: skip
    res = run_cli(store, "gpu", "--host", "h20-node", "--json", **fake_env(h20))
    assert res.code == 0, res.stderr
    mystery = _spec(tmp, "NVIDIA Mystery 9000")
    assert run_cli(store, "gpu", "--host", "mystery-node", **fake_env(mystery)).code == 0
    assert run_cli(store, "host", "--host", "lonely").code == 0
    return HostStore(store, res.json["run_id"])


def test_published_kimi_dp8_ep8_run_fits_on_the_141g_h20_only() -> None:
    p = planner("predict", "--host", "h20-141g-8x", *KIMI_DP8_EP8)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["gpu_model"] == "NVIDIA H20-3e" and data["gpus"] == 8
    host = next(a for a in data["assumptions"] if a["what"] == "host")
    assert "141 GiB, 4800 GB/s" in host["value"], host  # the spec sheet's 141 GB (binary)
    assert data["layout"]["name"] == "TP=1 DP=8 (attention) EP=8"
    assert data["kv_capacity_seqs_per_rank"] > 0 and data["points"][0]["tpot_ms"] > 0
    line = one_line_error(planner("predict", "--host", "h20-8x", *KIMI_DP8_EP8),
                          "planner predict: ")  # fmt: skip
    assert "does not fit on 8x NVIDIA H20 as TP=1 DP=8" in line


@pytest.mark.parametrize(("name", "content"), [("h20.json", json.dumps(H20_141)),
                                               ("h20.toml", TOML)])  # fmt: skip
def test_host_file_answers_as_the_preset_does(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    preset = json.loads(planner("predict", "--host", "h20-141g-8x", *KIMI_DP8_EP8).stdout)
    p = planner("predict", "--host", str(path), *KIMI_DP8_EP8)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["points"] == preset["points"]
    host = next(a for a in data["assumptions"] if a["what"] == "host")
    assert host["source"].startswith(f"host file {path}")


def test_host_file_on_the_calculator(tmp_path: Path) -> None:
    path = tmp_path / "h20.toml"
    path.write_text(TOML)
    p = planner("--model", "kimi-k2.5", "--host", str(path), "--report", "1,64", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["host"] == "h20-box" and data["gpu_count"] == 8


@pytest.mark.parametrize("command", [("predict", *KIMI_DP8_EP8), ("--model", "kimi-k2.5")])
def test_bad_host_file_is_one_line_exit_1(tmp_path: Path, command: tuple[str, ...]) -> None:
    path = tmp_path / "h20.json"
    path.write_text(json.dumps({**H20_141, "memory_gb": -141}))
    prefix = "planner predict: " if command[0] == "predict" else "planner: "
    line = one_line_error(planner(*command, "--host", str(path)), prefix)
    assert line.endswith(f"host file {path}: field 'memory_gb': -141 must be > 0")
    line = one_line_error(planner(*command, "--host", str(tmp_path / "nope.toml")), prefix)
    assert line.endswith(f"host file {tmp_path / 'nope.toml'}: no such file")


def test_host_and_host_from_store_exclude_each_other() -> None:
    p = planner("predict", "--host", "h20-8x", "--host-from-store", "x", *KIMI_DP8_EP8)
    assert p.returncode == 2 and "not allowed with argument" in p.stderr


def test_host_from_store_fills_what_nvml_cannot_report(hosts_store: HostStore) -> None:
    p = planner("predict", "--host-from-store", "h20-node", "--store", str(hosts_store.path),
                *KIMI_DP8_EP8)  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert (data["host"], data["gpu_model"], data["gpus"]) == ("h20-node", "NVIDIA H20-3e", 8)
    host = next(a for a in data["assumptions"] if a["what"] == "host")
    assert "4800 GB/s, nvlink" in host["value"] and "140 GiB" in host["value"]  # NVML: 143,771 MiB
    assert f"measured gpu run {hosts_store.h20_run} on h20-node" in host["source"]
    assert "memory bandwidth, TFLOPS, generation" in host["source"]
    assert "H20-3e spec sheet" in host["source"]
    preset = json.loads(planner("predict", "--host", "h20-141g-8x", *KIMI_DP8_EP8).stdout)
    assert data["points"][0]["tpot_ms"] == pytest.approx(preset["points"][0]["tpot_ms"])


def test_host_from_store_on_the_calculator_and_the_older_spelling(hosts_store) -> None:
    for flag in ("--host-from-store", "--host"):
        p = planner("--model", "kimi-k2.5", flag, "h20-node", "--store", str(hosts_store.path),
                    "--report", "1", "--json")  # fmt: skip
        assert p.returncode == 0, p.stderr
        data = json.loads(p.stdout)
        assert data["host"] == "h20-node" and data["gpu_count"] == 8


@pytest.mark.parametrize("host", ["nobody", "lonely"])
def test_host_without_a_gpu_run_names_the_collector(hosts_store: HostStore, host: str) -> None:
    line = one_line_error(planner("predict", "--host-from-store", host, "--store",
                                  str(hosts_store.path), *KIMI_DP8_EP8), "planner predict: ")  # fmt: skip
    assert f"--host-from-store '{host}': the store has no `gpu` run for it" in line
    assert f"run `python -m collectors gpu --host {host}` on that host" in line
    assert "hosts with one: h20-node, mystery-node)" in line


def test_misspelt_stored_host_suggests_it(hosts_store: HostStore) -> None:
    line = one_line_error(planner("predict", "--host-from-store", "h20-nod", "--store",
                                  str(hosts_store.path), *KIMI_DP8_EP8), "planner predict: ")  # fmt: skip
    assert "did you mean h20-node? hosts with one: h20-node, mystery-node)" in line


def test_unknown_gpu_name_is_one_line(hosts_store: HostStore) -> None:
    line = one_line_error(planner("predict", "--host-from-store", "mystery-node", "--store",
                                  str(hosts_store.path), *KIMI_DP8_EP8), "planner predict: ")  # fmt: skip
    assert "host 'mystery-node': GPU 'NVIDIA Mystery 9000'" in line
    assert "not in the known-GPU table" in line and "--host FILE" in line


def test_host_from_store_without_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "none.duckdb"
    line = one_line_error(planner("predict", "--host-from-store", "h20-node", "--store",
                                  str(missing), *KIMI_DP8_EP8), "planner predict: ")  # fmt: skip
    assert f"there is no store at {missing}" in line and not missing.exists()


def test_typo_in_a_preset_suggests_it(tmp_path: Path) -> None:
    line = one_line_error(planner("predict", "--host", "h20-141g", "--store",
                                  str(tmp_path / "none.duckdb"), *KIMI_DP8_EP8),
                          "planner predict: ")  # fmt: skip
    assert "--host 'h20-141g': not a host preset or a host file (did you mean h20-141g-8x?" in line
