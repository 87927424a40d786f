"""``comm``: real 2-rank gloo groups for every op and both sizing modes, hung/dead ranks,
torchrun mode, and the nccl-tests formulas."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.comm import metrics, sizes
from collectors.core.errors import InputError
from tests.comm import nccl_samples as s
from tests.helpers import ROOT, cli_env, query, run_cli

FAST = ("--iters", "3", "--warmup", "1", "--timeout", "120")


# ---- sizes and formulas (pure) ---------------------------------------------------------------


def test_token_payloads_follow_the_reference_case() -> None:
    # Kimi-K2.5: one token's AllReduce payload is 7168 x bf16 = 14,336 B; All-to-All sends
    # 14,336 B to each of 8 destinations.
    ar = sizes.token_point("all_reduce", 1, 7168, 2, 8)
    a2a = sizes.token_point("all_to_all", 1, 7168, 2, 8)
    ag = sizes.token_point("all_gather", 16, 7168, 2, 8)
    assert (ar.bytes, ar.count) == (14336, 7168)
    assert (a2a.bytes, a2a.count) == (8 * 14336, 7168)
    assert (ag.bytes, ag.count) == (8 * 16 * 14336, 16 * 7168)


def test_byte_sweeps_like_nccl_tests() -> None:
    assert sizes.parse_bytes("8:1K:x2") == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert sizes.parse_bytes("1K:4K:+1K") == [1024, 2048, 3072, 4096]
    assert sizes.parse_bytes("8,64K,1M") == [8, 65536, 1 << 20]
    # split ops round the element count down to a multiple of the world, as nccl-tests does
    p = sizes.byte_point("reduce_scatter", 100, 4, 8)
    assert (p.bytes, p.count) == (96, 3)
    assert sizes.byte_point("all_gather", 8, 4, 8) is None
    for bad in ("1K:8", "8:1K:x1", "a:b", "0:8"):
        with pytest.raises(InputError):
            sizes.parse_bytes(bad)
    with pytest.raises(InputError):
        sizes.parse_ops("all_reduce,allreduce")


def test_busbw_formulas_reproduce_nccl_tests_columns() -> None:
    # The 8-rank all_reduce rows nccl-tests printed (s.NEW_ROWS): algbw and busbw to 2 places.
    for line in s.NEW_ROWS[1:]:
        t = line.split()
        size, time_us, alg, bus = int(t[0]), float(t[5]), float(t[6]), float(t[7])
        assert round(metrics.algbw_gbps(size, time_us), 2) == alg
        assert round(metrics.busbw_gbps("all_reduce", size, time_us, 8), 2) == bus
    assert metrics.bus_factor("all_to_all", 8) == pytest.approx(7 / 8)
    assert metrics.bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert metrics.bus_factor("reduce_scatter", 2) == pytest.approx(1 / 2)
    assert metrics.bus_factor("all_reduce", 1) == 0  # one rank moves nothing over a bus
    assert metrics.busbw_gbps("all_reduce", 1000, 0.0, 2) is None


def test_latency_stats_and_slowest_rank() -> None:
    per_iter = metrics.slowest_rank_per_iter([[1.0, 5.0, 3.0], [2.0, 4.0, 9.0]])
    assert per_iter == [2.0, 5.0, 9.0]
    st = metrics.latency_stats([float(v) for v in range(1, 12)])  # 1..11
    assert (st.p50_us, st.min_us, st.mean_us, st.iters) == (6.0, 1.0, 6.0, 11)
    assert st.p10_us == pytest.approx(2.0) and st.p90_us == pytest.approx(10.0)


# ---- real gloo groups through the CLI --------------------------------------------------------


def test_tokens_sweep_every_op(store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--tokens", "1,4", "--hidden", "64", "--dtype", "bf16",
                  *FAST, "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    out = res.json
    assert out["backend"] == "gloo" and out["world_size"] == 2 and out["committed"]
    got = {(r["op"], r["tokens_per_rank"]): r for r in out["results"]}
    assert set(got) == {(op, t) for op in sizes.OPS for t in (1, 4)}
    assert got[("all_reduce", 4)]["bytes"] == 4 * 64 * 2
    assert got[("all_to_all", 4)]["bytes"] == 2 * 4 * 64 * 2
    for r in out["results"]:
        assert r["p10_us"] <= r["p50_us"] <= r["p90_us"] and r["busbw_gbps"] > 0
    rows = query(store_path, "SELECT op, wrong, in_place, hidden, dtype, iters, algbw_gbps, "
                 "busbw_gbps, device, interconnect, source FROM v_comm_results "
                 "WHERE run_id = ?", [out["run_id"]])  # fmt: skip
    assert len(rows) == 8
    for op, wrong, in_place, hidden, dtype, iters, alg, bus, device, ic, source in rows:
        assert wrong == 0, f"{op} gave wrong elements"  # the verification pass checks data
        assert in_place == (op == "all_reduce") and hidden == 64 and dtype == "bf16"
        assert iters == 3 and (device, ic, source) == ("cpu", "none", "comm")
        assert bus == pytest.approx(alg * metrics.bus_factor(op, 2))
    meta = query(store_path, "SELECT backend, graph_mode, nccl_env FROM comm_meta")
    assert meta == [("gloo", False, "{}")]


def test_bytes_sweep_every_op(store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--bytes", "64:4K:x8", "--dtype", "fp32", *FAST, "--json")
    assert res.code == 0, res.stderr
    results = res.json["results"]
    assert {r["op"] for r in results} == set(sizes.OPS)
    assert sorted({r["bytes"] for r in results}) == [64, 512, 4096]
    assert all(r["tokens_per_rank"] is None for r in results)
    wrong = query(store_path, "SELECT sum(wrong), count(*), count(tokens_per_rank) "
                  "FROM comm_results")  # fmt: skip
    assert wrong == [(0, 12, 0)]


def test_hung_rank_times_out_and_commits_nothing(store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--ops", "all_reduce", "--tokens", "1", "--hidden", "8",
                  "--iters", "2", "--timeout", "15", STEPSCOPE_COMM_FAULT="hang:1")  # fmt: skip
    assert res.code == 1
    assert "did not finish within --timeout 15 s" in res.stderr
    assert "rank 1: joined the process group" in res.stderr  # where the hung rank stopped
    assert "nothing was committed" in res.stderr and "Traceback" not in res.stderr
    assert not store_path.exists()


def test_dead_rank_is_reported_and_commits_nothing(store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--ops", "all_reduce", "--tokens", "1", "--hidden", "8",
                  "--iters", "2", "--timeout", "60", STEPSCOPE_COMM_FAULT="die:1")  # fmt: skip
    assert res.code == 1
    assert "rank 1 exited with code 3" in res.stderr and "nothing was committed" in res.stderr
    assert not store_path.exists()


def test_graph_mode_needs_a_gpu(store_path: Path) -> None:
    res = run_cli(store_path, "comm", "--graph", "--device", "cpu", *FAST)
    assert res.code == 1 and "--graph" in res.stderr and "GPU" in res.stderr
    bad = run_cli(store_path, "comm", "--tokens", "1,x")
    assert bad.code == 1 and "--tokens" in bad.stderr


def _torchrun_env(store: Path, rank: int, world: int, port: int) -> dict[str, str]:
    return cli_env(store, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip


def test_under_torchrun_variables(store_path: Path) -> None:
    from tests.e2e.conftest import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "collectors.comm", "--ops", "all_to_all,all_gather",
           "--tokens", "2", "--hidden", "16", *FAST, "--json", "--log-format", "text"]  # fmt: skip
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=_torchrun_env(store_path, r, 2, port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert '"world_size": 2' in outs[0][0] and outs[1][0] == ""  # rank 0 alone commits
    assert query(store_path, "SELECT count(*) FROM comm_results") == [(2,)]


def test_torchrun_rank_that_never_joins(store_path: Path) -> None:
    from tests.e2e.conftest import free_port

    env = _torchrun_env(store_path, 0, 2, free_port())
    proc = subprocess.run(
        [sys.executable, "-m", "collectors.comm", "--tokens", "1", "--hidden", "8",
         "--timeout", "6", "--log-format", "text"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "did not finish within --timeout 6 s" in proc.stderr
    assert "nothing was committed" in proc.stderr and not store_path.exists()
    assert os.environ.get("RANK") is None  # the test did not leak torchrun variables
