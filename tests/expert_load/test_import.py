"""``expert-load FILE...``: SGLang recorder outputs of every mode into the store, checked
against the model; figures computed here independently of the collector."""

from __future__ import annotations

import heapq
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.expert_load import recordings as rec
from tests.helpers import ROOT, cli_env, query, run_cli

SHAPE = rec.deepseek_v3()


def _contiguous(counts: np.ndarray, ep: int) -> np.ndarray:
    """Per routed layer: busiest rank / mean rank with experts r*E/ep.. on rank r."""
    rows = counts[counts.sum(axis=1) > 0].astype(float)
    per_rank = rows.reshape(len(rows), ep, -1).sum(axis=2)
    return per_rank.max(axis=1) / per_rank.mean(axis=1)


def _balanced(counts: np.ndarray, ep: int) -> np.ndarray:
    """Greedy packing written out with a heap: heaviest expert first onto the least-loaded
    rank with room (ties: lower rank), E/ep experts per rank."""
    out = []
    for row in counts[counts.sum(axis=1) > 0].astype(float):
        heap = [(0.0, r) for r in range(ep)]
        held = [0] * ep
        full = []
        for e in sorted(range(len(row)), key=lambda e: (-row[e], e)):
            load, r = heapq.heappop(heap)
            while held[r] == len(row) // ep:  # a full rank never comes back
                full.append((load, r))
                load, r = heapq.heappop(heap)
            held[r] += 1
            heapq.heappush(heap, (load + row[e], r))
        loads = [x for x, _ in heap + full]
        out.append(max(loads) / (sum(loads) / ep))
    return np.array(out)


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return rec.skewed_counts(SHAPE)


def test_json_form_imports_with_the_right_figures_at_ep_8_16_32(tmp_path, counts) -> None:
    store = tmp_path / "s.duckdb"
    path = rec.write_json(tmp_path / "ds_v3_logical_count.json", counts)
    res = run_cli(store, "expert-load", str(path), "--model", str(rec.CONFIG), "--json")
    assert res.code == 0, res.stderr
    out = res.json
    assert (out["layers"], out["experts"]) == (61, 256)
    layer_ratio = {d["layer"]: d["max_over_mean"] for d in out["per_layer"]}
    assert [layer_ratio[i] for i in range(SHAPE.dense)] == [None] * SHAPE.dense
    for layer in (3, 30, 60):
        row = counts[layer]
        assert layer_ratio[layer] == pytest.approx(row.max() / row.mean(), abs=1e-4)
    assert 3 < max(v for v in layer_ratio.values() if v) < 15  # skewed like the recordings
    for ep in (8, 16, 32):
        entry = out["per_rank"][str(ep)]
        contiguous, balanced = _contiguous(counts, ep), _balanced(counts, ep)
        assert entry["contiguous_max_over_mean"] == pytest.approx(contiguous.max(), abs=1e-4)
        assert entry["balanced_max_over_mean"] == pytest.approx(balanced.max(), abs=1e-4)
        assert entry["contiguous_worst_layer"] == SHAPE.dense + int(contiguous.argmax())
        assert entry["balanced_max_over_mean"] < entry["contiguous_max_over_mean"]
    assert sorted(int(k) for k in out["per_rank"]) == [2, 4, 8, 16, 32, 64, 128, 256]
    # the store holds the same: counts, per-layer view, per-rank figures
    run_id = out["run_id"]
    stored = query(store, "SELECT layer, expert, count FROM v_expert_load_counts WHERE run_id = ?",
                   [run_id])  # fmt: skip
    grid = np.zeros_like(counts)
    for layer, expert, n in stored:
        grid[layer, expert] = n
    assert (grid == counts).all()
    worst16 = query(store, "SELECT worst_max_over_mean, mean_max_over_mean FROM v_expert_load_ep "
                    "WHERE run_id = ? AND ep_size = 16 AND placement = 'contiguous'", [run_id])  # fmt: skip
    assert worst16[0][0] == pytest.approx(_contiguous(counts, 16).max())
    assert worst16[0][1] == pytest.approx(_contiguous(counts, 16).mean())
    meta = query(store, "SELECT model_id, recorder_mode, num_layers, num_experts, top_k, "
                 "dense_layers, routed_layers FROM v_expert_load WHERE run_id = ?", [run_id])  # fmt: skip
    assert meta[0] == (str(rec.CONFIG), "logical_count", 61, 256, 8, 3, 58)
    again = run_cli(store, "expert-load", str(path), "--model", str(rec.CONFIG), "--json")
    assert again.code == 0 and again.json["run_id"] == run_id  # re-import: a no-op
    assert query(store, "SELECT count(*) FROM v_expert_load")[0][0] == 1


def test_stat_dump_imports_summed_over_its_buffer(tmp_path, counts) -> None:
    pytest.importorskip("torch")
    store = tmp_path / "s.duckdb"
    dump = rec.write_stat(tmp_path / "expert_distribution_recorder_1764900000.1.pt", counts)
    res = run_cli(store, "expert-load", str(dump), "--model", "deepseek-v3", "--json")
    assert res.code == 0, res.stderr
    mode, total = query(store, "SELECT recorder_mode, total_count FROM v_expert_load")[0]
    assert mode == "stat" and total == counts.sum()
    assert res.json["per_rank"]["32"]["contiguous_max_over_mean"] == pytest.approx(
        _contiguous(counts, 32).max(), abs=1e-4)  # fmt: skip


def test_per_pass_rank_files_are_one_recording_mapped_to_logical_experts(tmp_path, counts) -> None:
    pytest.importorskip("torch")
    store = tmp_path / "s.duckdb"
    files = rec.write_per_pass(tmp_path, counts, SHAPE, ranks=2, redundant=32)
    res = run_cli(store, "expert-load", *map(str, files), "--model", "deepseek-v3", "--ep", "2",
                  "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    mode, passes, ep = query(store, "SELECT recorder_mode, forward_passes, recorded_ep "
                             "FROM v_expert_load")[0]  # fmt: skip
    assert (mode, passes, ep) == ("per_pass", 3, 2)
    grid = np.zeros_like(counts)
    for layer, expert, n in query(store, "SELECT layer, expert, count FROM v_expert_load_counts"):
        grid[layer, expert] = n
    assert (grid == counts).all()
    # Under the recorded map: 288 slots over 2 ranks; experts 0-31 have a replica on rank 1
    # (slots 256-287), so each sends half its tokens there.
    mapping = rec.physical_map(SHAPE, 32)
    rows = counts[SHAPE.dense:].astype(float)
    replicas = np.array([np.count_nonzero(mapping[0] == e) for e in range(SHAPE.experts)])
    per_slot = rows[:, mapping[0]] / replicas[mapping[0]]
    loads = per_slot.reshape(len(rows), 2, 144).sum(axis=2)
    expected = (loads.max(axis=1) / loads.mean(axis=1)).max()
    assert res.json["per_rank"]["2"]["recorded_max_over_mean"] == pytest.approx(expected, abs=1e-4)


def test_per_token_dump_counts_its_top_k_ids(tmp_path) -> None:
    pytest.importorskip("torch")
    store = tmp_path / "s.duckdb"
    path = tmp_path / "expert_distribution_recorder_1764900000.9_0.pt"
    counts = rec.write_per_token(path, SHAPE)
    res = run_cli(store, "expert-load", str(path), "--model", "deepseek-v3", "--json")
    assert res.code == 0, res.stderr
    assert "placement map" in res.stderr  # it carries one; without --ep it is only said
    assert query(store, "SELECT recorder_mode FROM v_expert_load")[0][0] == "per_token"
    grid = np.zeros_like(counts)
    for layer, expert, n in query(store, "SELECT layer, expert, count FROM v_expert_load_counts"):
        grid[layer, expert] = n
    assert (grid == counts).all() and grid.sum() == 2 * 96 * 8 * 58


def _one_line_error(res, *words: str) -> None:
    assert res.code == 1, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_wrong_shape_for_the_model_is_one_line_and_commits_nothing(tmp_path) -> None:
    store = tmp_path / "s.duckdb"
    kimi = np.ones((61, 384), dtype=np.int64)  # a Kimi-K2 recording named DeepSeek-V3
    kimi[:1] = 0
    path = rec.write_json(tmp_path / "kimi.json", kimi)
    res = run_cli(store, "expert-load", str(path), "--model", "deepseek-v3")
    _one_line_error(res, "kimi.json", "61 layers x 384", "256 routed experts")
    assert not store.exists() or query(store, "SELECT count(*) FROM v_runs")[0][0] == 0
    dense = rec.skewed_counts(SHAPE)
    dense[1, 5] = 10  # layer 1 is dense in DeepSeek-V3
    res = run_cli(store, "expert-load", str(rec.write_json(tmp_path / "d.json", dense)),
                  "--model", "deepseek-v3")  # fmt: skip
    _one_line_error(res, "layer 1 is a dense layer")
    bad = tmp_path / "nope.json"
    bad.write_text(json.dumps({"counts": [[1, 2]]}))
    _one_line_error(run_cli(store, "expert-load", str(bad), "--model", "deepseek-v3"),
                    "no logical_count")  # fmt: skip
    # vLLM's EPLB log line (eplb_state.py EplbState.step): no per-expert counts in it
    log = tmp_path / "vllm_serve.log"
    log.write_text("INFO 12-05 10:00:01 [eplb_state.py:512] EPLB step: 120 for model "
                   "deepseek-ai/DeepSeek-V3: avg_tokens=4096.00, max_tokens=7421, "
                   "balancedness=0.5519, steps until the next rearrangement: 2880\n")  # fmt: skip
    _one_line_error(run_cli(store, "expert-load", str(log), "--model", "deepseek-v3"),
                    "a vLLM log", "no per-expert counts")  # fmt: skip
    assert not store.exists() or query(store, "SELECT count(*) FROM v_runs")[0][0] == 0


def test_per_layer_totals_that_differ_slightly_are_accepted_and_said(tmp_path, counts) -> None:
    store = tmp_path / "s.duckdb"
    uneven = counts.copy()
    uneven[10, 0] += int(counts[10].sum() * 0.0001)  # one layer 0.01% over the others
    res = run_cli(store, "expert-load", str(rec.write_json(tmp_path / "u.json", uneven)),
                  "--model", "deepseek-v3", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    assert "per-layer totals differ by up to 0.010%; accepted" in res.stderr
    spread = query(store, "SELECT layer_total_spread FROM v_expert_load")[0][0]
    assert spread == pytest.approx(1e-4, rel=0.05)


def test_a_pt_dump_without_torch_is_one_line(tmp_path, counts) -> None:
    pytest.importorskip("torch")
    import subprocess

    dump = rec.write_stat(tmp_path / "expert_distribution_recorder_1.pt", counts)
    code = ("import sys; sys.modules['torch'] = None; from collectors.cli import main; "
            "sys.exit(main(sys.argv[1:]))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code, "expert-load", str(dump), "--model",
                           "deepseek-v3", "--log-format", "text"], cwd=ROOT,
                          env=cli_env(tmp_path / "s.duckdb"), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 1
    assert "needs torch" in proc.stderr and "JSON logical_count" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dense_models_and_missing_model_are_refused(tmp_path, counts) -> None:
    path = rec.write_json(tmp_path / "c.json", counts)
    _one_line_error(run_cli(tmp_path / "s.duckdb", "expert-load", str(path)), "--model")
    dense_cfg = Path(rec.CONFIG).with_name("meta-llama--Meta-Llama-3.1-8B_config.json")
    _one_line_error(run_cli(tmp_path / "s.duckdb", "expert-load", str(path), "--model",
                            str(dense_cfg)), "dense model")  # fmt: skip
