"""Runs under the host that recorded them (issue 57), for every verb that imports files or
reads a server's URL (collectors/core/hosts.py): benchmark results and expert dumps name no
host, so they are filed under ``--host`` or ``unknown`` - never the importing machine, kept
as ``imported_on``; a server's runs are filed under its machine: this one for a loopback
URL, else the URL's host name. The Overview lists the unknown ones apart and the Serving
page still predicts for them on the hardware the user picks.

Real result files of the shapes the engines write (tests/vllm/bench_fixtures.py,
tests/sglang/fixtures.py), the real CLI, a real DuckDB store, a real HTTP test server."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from collectors.core.hosts import run_host, server_machine
from tests.expert_load import recordings as rec
from tests.helpers import query, run_hosts, run_in_process
from tests.pages.apptest import open_page, page_text, problems, store_env
from tests.sglang import fixtures as sglang_fixtures
from tests.vllm import bench_fixtures
from tests.vllm.conftest import ServerProc

ME = socket.gethostname()
MODEL = "moonshotai/Kimi-K2.5"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """vLLM results and an expert dump imported without --host, SGLang results with it."""
    tmp = tmp_path_factory.mktemp("run-host")
    store = tmp / "stepscope.duckdb"
    bench_fixtures.write_sweep(tmp / "tp8", tp=8)
    sglang_fixtures.write_jsonl(tmp / "sglang.jsonl")
    dump = rec.write_json(tmp / "ds.json", rec.skewed_counts(rec.deepseek_v3()))
    runs = {}
    for name, args in (
        ("vllm", ["vllm-bench", "--results", str(tmp / "tp8")]),
        ("sglang", ["sglang-bench", "--results", str(tmp / "sglang.jsonl"), "--model", MODEL,
                    "--server-args", "--tp 8", "--host", "gpu-node-7"]),
        ("experts", ["expert-load", str(dump), "--model", "deepseek-v3"]),
    ):  # fmt: skip
        res = run_in_process(store, *args, "--json")
        assert res.code == 0, res.stderr
        runs[name] = res.json["run_id"]
    return store, runs


def _run(store: Path, run_id: str) -> tuple:
    return run_hosts(store, run_id, "vllm")


def test_imported_results_and_dumps_are_filed_under_unknown_not_this_machine(stored) -> None:
    store, runs = stored
    # nothing of this machine's inventory either: its GPUs and vLLM ran nothing of these
    assert _run(store, runs["vllm"]) == ("unknown", ME, ME, None, None)
    assert _run(store, runs["experts"]) == ("unknown", ME, ME, None, None)
    assert query(store, "SELECT DISTINCT host FROM v_serving_bench WHERE run_id = ?",
                 [runs["vllm"]]) == [("unknown",)]  # fmt: skip
    assert ME not in {h for (h,) in query(store, "SELECT host FROM v_hosts")}


def test_host_flag_names_the_host_of_imported_results(stored) -> None:
    store, runs = stored
    assert _run(store, runs["sglang"])[:2] == ("gpu-node-7", ME)


def test_relabel_moves_an_imported_benchmark_with_its_results(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    bench_fixtures.write_sweep(tmp_path / "tp8", tp=8, levels=(1, 4))
    res = run_in_process(store, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json")
    assert res.code == 0, res.stderr
    run_id = res.json["run_id"]
    moved = run_in_process(store, "relabel", run_id, "--host", "h100-box", "--json")
    assert moved.code == 0, moved.stderr
    assert moved.json == {"run_id": run_id, "host": "h100-box", "before": "unknown",
                          "changed": True}  # fmt: skip
    assert _run(store, run_id)[:2] == ("h100-box", ME)
    assert query(store, "SELECT host, count(*) FROM v_serving_bench GROUP BY host") == [
        ("h100-box", 2)]  # fmt: skip


@pytest.mark.parametrize("url, host", [
    ("http://127.0.0.1:8000", ME), ("http://127.0.0.2:8000", ME), ("http://localhost:30000", ME),
    ("http://[::1]:8000", ME), ("http://0.0.0.0:8000", ME), (f"http://{ME}:8000", ME),
    ("http://gpu-node-7:8000", "gpu-node-7"), ("https://H100-Box.lab.example/v1", "h100-box.lab.example"),
    ("http://10.0.0.5:8000", "10.0.0.5"),
])  # fmt: skip
def test_a_servers_runs_are_filed_under_its_machine(url: str, host: str) -> None:
    assert run_host(None, url=url) == host
    assert run_host("named", url=url) == "named"  # --host always wins


def test_imported_files_are_filed_under_the_host_they_name_else_unknown() -> None:
    assert run_host(None, from_files="node005") == "node005"
    assert run_host(None) == "unknown"
    assert run_host("gpu-node-7", from_files="node005") == "gpu-node-7"


def _non_loopback_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") or server_machine(f"http://{address}") is None \
        else address  # fmt: skip


def test_a_scrape_is_filed_under_the_servers_machine(tmp_path: Path) -> None:
    """The same real test server scraped at a loopback URL (this machine, its own snapshot)
    and at a non-loopback address (that machine; this one kept as imported_on, its GPUs not
    taken for the server's)."""
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to reach a server at")
    store = tmp_path / "stepscope.duckdb"
    server = ServerProc.launch("tests.vllm.server", {"model": MODEL, "bind": "0.0.0.0",
                                                     "trace_dir": str(tmp_path)},
                               tmp_path / "srv.json", tmp_path)  # fmt: skip
    try:
        local = run_in_process(store, "vllm-metrics", "--url", server.url, "--json")
        remote = run_in_process(store, "vllm-metrics", "--url",
                                f"http://{address}:{server.port}", "--json")  # fmt: skip
    finally:
        server.stop()
    assert local.code == 0 and remote.code == 0, local.stderr + remote.stderr
    assert _run(store, local.json["run_id"])[:3] == (ME, None, ME)
    host, imported_on, _, gpu_model, _ = _run(store, remote.json["run_id"])
    assert (host, imported_on, gpu_model) == (address, ME, None)
    assert query(store, "SELECT DISTINCT host FROM v_serving_scrapes WHERE run_id = ?",
                 [remote.json["run_id"]]) == [(address,)]  # fmt: skip


def test_the_overview_lists_imported_benchmarks_and_dumps_apart(stored) -> None:
    store, runs = stored
    with store_env(store):
        at = open_page("pages/overview.py")
    assert not problems(at)
    (listed,) = [d.value for d in at.dataframe if "imported_on" in d.value.columns]
    assert sorted(listed["run_id"]) == sorted([runs["vllm"], runs["experts"]])
    assert set(listed["imported_on"]) == {ME}
    hosts = next(d.value for d in at.dataframe if "stale_collectors" in d.value.columns)
    assert hosts["host"].tolist() == ["gpu-node-7"]


def test_the_serving_page_predicts_unknown_host_results_on_the_hardware_picked(stored) -> None:
    store, runs = stored
    with store_env(store):
        measured = open_page("pages/serving.py", {"model": MODEL, "runs": runs["vllm"]})
        picked = open_page("pages/serving.py", {"model": MODEL, "runs": runs["vllm"],
                                                "hw": "rtx-pro-6000-pcie-8x"})  # fmt: skip
    assert not problems(measured) and not problems(picked)
    # the default, the benchmark host's own gpu run: an unknown host has none, and says why
    said = page_text(measured)
    assert "No prediction for: TP8 on unknown: the results name no host: pick the hardware" \
        in said and "relabel RUN_ID --host NAME" in said  # fmt: skip
    text = page_text(picked)
    assert "Planner prediction (dashed) for the same model and layout on: rtx-pro-6000-pcie-8x" \
        in text and "No prediction for" not in text  # fmt: skip


def test_calibrated_mode_never_fits_unknown_host_runs_together(stored) -> None:
    """Runs that name no machine may come from several: the Serving page's calibrated mode
    says so instead of fitting one calibration to all of them."""
    store, runs = stored
    with store_env(store):
        at = open_page("pages/serving.py", {"model": MODEL, "runs": runs["vllm"],
                                            "hw": "rtx-pro-6000-pcie-8x", "calibrate": "true"})  # fmt: skip
    assert not problems(at)
    text = page_text(at)
    assert "unknown: not calibrated: its runs name no machine" in text
    assert "relabel RUN_ID --host NAME" in text and "unknown: not applied" not in text


@pytest.mark.parametrize("verb", ["host", "gpu", "nccl-tests"])
def test_host_unknown_is_refused_in_one_line_by_every_verb(tmp_path: Path, verb: str) -> None:
    """``unknown`` is the name kept for runs whose files name no machine: a live inventory
    or an import filed there by hand would mix with them."""
    store = tmp_path / "s.duckdb"
    log = tmp_path / "nccl.log"
    log.write_text("")
    extra = [str(log)] if verb == "nccl-tests" else []
    res = run_in_process(store, verb, *extra, "--host", "unknown")
    assert res.code == 1 and res.stderr.count("\n") == 1, res.stderr
    assert "--host 'unknown' is not a host name" in res.stderr and not store.exists()
