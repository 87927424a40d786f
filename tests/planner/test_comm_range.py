"""Comm curves used only where they hold (issue 57), on real nccl-tests logs of both shapes
(tests/fixtures/nccl, imported by the real ``nccl-tests`` collector into a real store):

- a bandwidth run (``-b 128M -e 4G``, 8x H100 on one node): below its sizes it knows no
  latency, so a decode-sized message is the host's spec latency plus the measured bandwidth,
  never its 128 MiB time;
- a small-size run (``-b 8 -e 16G``, 16 ranks of H100): its own latency below 8 B, its points
  inside.

A curve stands only for the GPU model and world size it was measured on; the others are
listed as not used, with why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planner.cost.comm import CommSet, curves_from_rows, pick, same_gpu
from planner.cost.floors import comm_curve
from planner.specs import hardware
from store.location import resolve
from store.queries import planner as qp
from tests.helpers import FIXTURES, ROOT, run_cli

NCCL = FIXTURES / "nccl"
BANDWIDTH = NCCL / "h100_8gpu_all_reduce_128M-4G.log"  # NVIDIA/nccl-tests#290
SMALL = NCCL / "h100_16rank_all_reduce_8B-16G.log"  # NVIDIA/nccl-tests#309
H100 = hardware.preset("h100-sxm-8x")
LLAMA_70B = FIXTURES / "serving" / "configs" / "meta-llama--Meta-Llama-3.1-70B_config.json"
MIB = 2**20


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Both real logs imported by the CLI (and one cut of its preamble); run ids by name."""
    tmp = tmp_path_factory.mktemp("comm-range")
    store = tmp / "stepscope.duckdb"
    runs = {}
    for name, path in (("bandwidth", BANDWIDTH), ("small", SMALL)):
        res = run_cli(store, "nccl-tests", str(path), "--json")
        assert res.code == 0, res.stderr
        runs[name] = res.json["run_id"]
    # the same real log with its preamble cut: it names neither its host nor its GPUs
    bare = tmp / "bare.log"
    bare.write_text("\n".join(x for x in BANDWIDTH.read_text().splitlines()
                              if "Rank" not in x) + "\n")  # fmt: skip
    res = run_cli(store, "nccl-tests", str(bare), "--world-size", "8", "--op", "all_reduce",
                  "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    runs["bare"] = res.json["run_id"]
    return store, runs


@pytest.fixture(scope="module")
def curves(stored) -> dict[str, object]:
    """The curves of the stored runs as the planner reads them."""
    store, runs = stored
    rows = qp.comm_rows(resolve(str(store)), list(runs.values())).to_dict("records")
    got = {}
    for name, run_id in runs.items():
        (c,) = [c for c in curves_from_rows(rows, "nvlink") if run_id in c.source]
        got[name] = c
    return got


def test_a_bandwidth_run_prices_small_messages_at_the_spec_latency_plus_its_bandwidth(curves):
    c = pick("all_reduce", 8, [curves["bandwidth"]], H100, 0.7)
    assert c is not None and c.bytes == (128.0 * MIB, *c.bytes[1:]) and c.bytes[-1] == 4096 * MIB
    assert c.gpu_model == "NVIDIA H100 80GB HBM3"
    # its own bandwidth: the bytes on the wire at 4 GiB over its time (both halves' median)
    bw, where = c.bandwidth()
    t_4g = (15870 + 15773) / 2
    assert bw == pytest.approx(4096 * MIB * 1.75 / (t_4g * 1e-6)) and "measured" in where
    # a decode AllReduce (Llama-3.1-70B, 32 tokens x 8192 x bf16 = 512 KiB): 6 us (the
    # H100's spec latency) + its bytes at that bandwidth; the 128 MiB point took 614 us
    msg = 32 * 8192 * 2
    assert float(c.latency_us(msg)) == pytest.approx(6.0 + msg * 1.75 / bw * 1e6)
    assert float(c.latency_us(msg)) < 10 < c.us[0] / 50
    # inside: the measured points; beyond: the last one plus the extra bytes
    assert float(c.latency_us(1024 * MIB)) == pytest.approx((4038.8 + 4043.6) / 2)
    assert float(c.latency_us(8192 * MIB)) == pytest.approx(t_4g + 4096 * MIB * 1.75 / bw * 1e6)
    ys = c.latency_us(np.geomspace(1, 2**34, 80))
    assert np.all(np.diff(ys) >= -1e-9)  # monotone in bytes across both extensions
    assert c.explain(msg, msg) == ("all_reduce measured 128 MiB-4 GiB; 512 KiB from the spec "
                                   "latency of h100-sxm-8x plus the measured bandwidth")  # fmt: skip


def test_a_small_size_run_keeps_its_own_latency(curves):
    c = pick("all_reduce", 16, [curves["small"]], H100, 0.7)
    assert c.bytes[0] == 8 and c.bytes[-1] == 16 * 2**30 and c.world_size == 16
    lat, where = c.latency()
    assert "measured latency" in where and lat == pytest.approx(c.us[0], rel=1e-6)
    assert float(c.latency_us(1.0)) <= c.us[0]  # below 8 B: never more than 8 B took
    assert float(c.latency_us(MIB)) == pytest.approx((71.93 + 71.47) / 2)
    assert c.explain(16384, 524288) == "all_reduce measured 8 B-16 GiB; 16-512 KiB inside it"


def test_a_curve_stands_only_for_its_gpu_model_and_world_size(curves):
    given = [curves["bandwidth"], curves["small"], curves["bare"]]
    a100 = CommSet(given, hardware.preset("a100-sxm-8x"))
    assert a100.kind("all_reduce", 8) == "spec"  # an H100 curve says nothing of A100s
    why = {n.curve.source: n.why for n in a100.not_used()}
    assert why[curves["bandwidth"].source] == ("measured on NVIDIA H100 80GB HBM3, not this "
                                               "host's NVIDIA A100")  # fmt: skip
    assert "names no GPU" in why[curves["bare"].source]
    h100 = CommSet(given, H100)
    assert h100.get("all_reduce", 8).source == curves["bandwidth"].source
    h100.latency_us("all_reduce", 8, np.array([16384.0, 524288.0]))
    assert "16-512 KiB from the spec latency" in h100.explain("all_reduce", 8)
    why = {n.curve.source: n.why for n in h100.not_used()}
    assert why[curves["small"].source] == "the all_reduce here spans 8 GPUs, not 16"
    assert "names no GPU" in why[curves["bare"].source]
    # named by the user (--comm-run), a curve that names no GPU is taken as the user says
    from dataclasses import replace

    chosen = replace(curves["bare"], chosen=True)
    assert pick("all_reduce", 8, [chosen], H100, 0.7).source == chosen.source


def test_the_floors_take_the_same_lookup(curves):
    """One lookup for the planner and the floors: the floors' curve for these GPUs is the
    planner's, at the full link bandwidth where it measured none."""
    (floor,) = comm_curve("all_reduce", 8, [curves["bandwidth"], curves["small"]], H100)
    assert floor.source == curves["bandwidth"].source and floor.spec_busbw_gbps == 450
    (spec,) = comm_curve("all_reduce", 8, [curves["small"]], H100)
    assert spec.kind == "spec"  # the 16-rank curve is no 8-GPU floor
    (none,) = comm_curve("all_reduce", 8, [curves["bandwidth"]], hardware.preset("a100-sxm-8x"))
    assert none.kind == "spec"


def test_the_curve_reaching_the_smallest_sizes_is_taken_first(curves):
    from dataclasses import replace

    small8 = replace(curves["small"], world_size=8, source="measured comm run small8")
    got = pick("all_reduce", 8, [curves["bandwidth"], small8], H100, 0.7)
    assert got.source == "measured comm run small8"


@pytest.mark.parametrize("a, b, same", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100", True),
    ("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", False),
    ("NVIDIA H200", "NVIDIA H100", False),
    ("NVIDIA H20-3e", "NVIDIA H20", False),
    ("AMD Instinct MI300X", "MI300X", True),
    ("Tesla V100-SXM2-32GB", "NVIDIA H100", False),
])  # fmt: skip
def test_same_gpu(a: str, b: str, same: bool) -> None:
    assert same_gpu(a, b) is same



def _predict(store: Path, tp: int, *extra: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "planner", "predict", "--model", str(LLAMA_70B),
                        "--host", "h100-sxm-8x", "--tp", str(tp), "--isl", "1024", "--osl",
                        "256", "--concurrency", "1,16,64", "--store", str(store), *extra,
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("tp", [8, 4])
def test_predict_with_a_bandwidth_run_stays_with_the_prediction_without_it(stored, tp) -> None:
    """Issue 57: with a bandwidth run of the host's GPUs, Llama-3.1-70B's decode AllReduces
    (16-512 KiB) are no longer priced at its 128 MiB time (614 us each, 161 a step: +99 ms)."""
    store, runs = stored
    plain = _predict(store, tp)
    used = _predict(store, tp, "--comm-run", runs["bandwidth"], "--comm-run", runs["small"])
    for a, b in zip(plain["points"], used["points"], strict=True):
        assert b["tpot_ms"] == pytest.approx(a["tpot_ms"], rel=0.15)
    (ar,) = used["collectives"]
    not_used = {n["source"]: n for n in used["comm_not_used"]}
    small = next(s for s in not_used if runs["small"] in s)
    assert not_used[small]["why"] == f"the all_reduce here spans {tp} GPUs, not 16"
    if tp == 8:  # the 8-GPU curve is this layout's: it says which sizes it measured
        assert ar["kind"] == "measured" and runs["bandwidth"] in ar["source"]
        # below it: decode's 16 KiB up to a prefill step of the token budget's 8,192 tokens
        assert ar["sizes"].startswith("all_reduce measured 128 MiB-4 GiB; 16 KiB up to 128 MiB")
        assert "from the spec latency of h100-sxm-8x plus the measured bandwidth" in ar["sizes"]
    else:  # measured over 8 GPUs: listed as not used for TP=4, with its sizes
        assert ar["kind"] == "spec" and plain["points"] == used["points"]
        bw = next(s for s in not_used if runs["bandwidth"] in s)
        assert not_used[bw]["measured"] == "all_reduce measured 128 MiB-4 GiB"
        assert not_used[bw]["why"] == "the all_reduce here spans 4 GPUs, not 8"
