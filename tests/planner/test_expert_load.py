"""A measured expert load prices the busiest EP rank: ``--expert-load RUN_ID`` on predict and
the plan, against uniform routing, with the difference recomputed here from binomials."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from tests.expert_load import recordings as rec
from tests.helpers import planner_cli, run_cli

SHAPE = rec.deepseek_v3()
HOT = 0.6  # experts 0-31 (EP rank 0 of 8, placed contiguously) take 60% of every layer




def hot_block(total: int = 8_000_000) -> np.ndarray:
    counts = np.zeros((SHAPE.layers, SHAPE.experts))
    block = SHAPE.experts // 8
    counts[SHAPE.dense:, :block] = total * HOT / block
    counts[SHAPE.dense:, block:] = total * (1 - HOT) / (SHAPE.experts - block)
    return counts


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, str, str]:
    """A store with two expert-load runs of DeepSeek-V3: a hot block and a uniform one."""
    tmp = tmp_path_factory.mktemp("expert-load")
    store = tmp / "s.duckdb"
    ids = []
    for name, counts in (("hot", hot_block()),
                         ("uniform", np.full((SHAPE.layers, SHAPE.experts), 1000.0))):  # fmt: skip
        counts[: SHAPE.dense] = 0
        res = run_cli(store, "expert-load", str(rec.write_json(tmp / f"{name}.json", counts)),
                      "--model", "deepseek-v3", "--json")  # fmt: skip
        assert res.code == 0, res.stderr
        ids.append(res.json["run_id"])
    return store, ids[0], ids[1]


def predict(store: Path, *extra: str, conc: str = "4") -> dict:
    p = planner_cli("predict", "--model", "deepseek-v3", "--host", "h200-sxm-8x", "--tp", "8",
                    "--ep", "--isl", "1", "--osl", "1024", "--concurrency", conc, "--json",
                    *extra)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def expected_max(n: int, probs: list[float]) -> float:
    """E[max over ranks of Binomial(n, p_r)], ranks independent: sum_j 1 - prod_r F_r(j)."""
    return float(sum(1 - np.prod([binom.cdf(j, n, p) for p in probs]) for j in range(n)))


def test_skewed_load_is_slower_than_uniform_by_the_busiest_ranks_extra_reads(stored) -> None:
    store, hot, _ = stored
    # vllm bench serve's fixed lengths: the 4 requests start and end together, so every
    # decode step of the simulated schedule carries 4 tokens (InferenceX's lengths, uniform
    # in [0.8 L, L], leave steps of 3, 2 and 1 token at the end, which the mean takes in)
    fixed = ("--bench", "vllm", "--num-prompts", "4")
    uniform = predict(store, *fixed)
    measured = predict(store, "--expert-load", hot, "--store", str(store), *fixed)
    u, m = uniform["points"][0], measured["points"][0]
    assert u["running_per_rank"] == m["running_per_rank"] == 4  # 4 tokens meet in the MoE
    t, k, per_rank = 4, SHAPE.top_k, SHAPE.experts // 8
    p_uniform = 1 - (1 - k / SHAPE.experts) ** t
    p_hot = 1 - (1 - k * HOT / per_rank) ** t
    p_cold = 1 - (1 - k * (1 - HOT) / (SHAPE.experts - per_rank)) ** t
    busiest_uniform = expected_max(per_rank, [p_uniform] * 8)
    busiest_measured = expected_max(per_rank, [p_hot] + [p_cold] * 7)
    assert busiest_measured > busiest_uniform + 5  # the hot rank touches most of its experts
    # One more expert on the busiest rank costs what uniform routing's imbalance costs per
    # expert: its bytes (decode is bandwidth-bound here) and its grouped-GEMM overhead.
    per_expert = u["breakdown_ms"]["expert_imbalance"] / (busiest_uniform - per_rank * p_uniform)
    extra = per_expert * (busiest_measured - busiest_uniform)
    routed = lambda pt: pt["breakdown_ms"]["experts"] + pt["breakdown_ms"]["expert_imbalance"]  # noqa: E731
    assert routed(m) - routed(u) == pytest.approx(extra, rel=2e-3)
    assert m["tpot_ms"] - u["tpot_ms"] == pytest.approx(extra, rel=0.01)
    routing = {a["what"]: a for a in measured["assumptions"]}["expert routing"]
    assert routing["value"].startswith("measured (contiguous placement)")
    assert routing["source"] == hot
    assert {a["what"]: a for a in uniform["assumptions"]}["expert routing"]["value"].startswith(
        "uniform top-k")  # fmt: skip
    block = measured["expert_load"]["points"][0]
    assert block["tpot_ms_uniform"] == pytest.approx(u["tpot_ms"], abs=1e-3)
    assert block["tpot_ms_contiguous"] == pytest.approx(m["tpot_ms"], abs=1e-3)
    # balanced: the 32 hot experts 4 to a rank, every rank alike again
    assert block["balanced_win_ms"] > 0.8 * extra
    balanced = predict(store, "--expert-load", hot, "--store", str(store),
                       "--expert-placement", "balanced", *fixed)  # fmt: skip
    assert balanced["points"][0]["tpot_ms"] == pytest.approx(block["tpot_ms_balanced"], abs=1e-3)


def test_a_uniform_measurement_prices_as_uniform_routing(stored) -> None:
    store, _, flat = stored
    a = predict(store, conc="1,8,64,512")
    b = predict(store, "--expert-load", flat, "--store", str(store), conc="1,8,64,512")
    for x, y in zip(a["points"], b["points"], strict=True):
        assert y["tpot_ms"] == pytest.approx(x["tpot_ms"], rel=1e-9)
        assert y["ttft_ms"] == pytest.approx(x["ttft_ms"], rel=1e-9)


def test_the_plan_says_what_a_balanced_placement_would_win(stored) -> None:
    store, hot, _ = stored
    p = planner_cli("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--expert-load", hot,
                    "--store", str(store), "--concurrency", "1-64", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    effects = data["expert_load"]["effects"]
    assert data["expert_load"]["run_id"] == hot and effects
    ep_layouts = {e["layout"] for e in effects}
    assert "TP=8 + EP (DP=1)" in ep_layouts and not any(n.startswith("TP=8 ") and "EP" not in n
                                                        for n in ep_layouts)  # fmt: skip
    assert all(e["balanced_ms"] <= e["contiguous_ms"] + 1e-9 for e in effects)
    assert max(e["balanced_win_ms"] for e in effects) > 0.5
    assert any("a balanced placement would win" in f for f in data["findings"])
    routing = {a["what"]: a for a in data["assumptions"]}["expert routing"]
    assert routing["value"].startswith("measured")
    # every layout's predict command carries the run, and answers the plan's number
    lay = next(x for x in data["layouts"] if x["name"] == "TP=8 + EP (DP=1)")
    assert f"--expert-load {hot}" in lay["predict"] and f"--store {store}" in lay["predict"]
    args = lay["predict"].split()[4:] + ["--concurrency", "16", "--json"]
    alone = json.loads(planner_cli("predict", *args).stdout)
    at16 = next(pt for pt in lay["points"] if pt["concurrency"] == 16)
    assert alone["points"][0]["tpot_ms"] == pytest.approx(at16["tpot_ms"], abs=1e-3)
    text = planner_cli("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--expert-load", hot,
                       "--store", str(store), "--concurrency", "1-64")  # fmt: skip
    assert "Measured expert load:" in text.stdout and "a balanced placement would win" in text.stdout


def test_a_load_of_another_shape_or_an_unknown_run_is_one_line(stored) -> None:
    store, hot, _ = stored
    for args, words in (
        (("--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--expert-load", hot),
         "61 layers x 256 experts, but kimi-k2.5 has 61 layers x 384"),
        (("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--expert-load", "nope"),
         "--expert-load nope: no such expert-load run"),
    ):  # fmt: skip
        p = planner_cli(*args, "--store", str(store))
        assert p.returncode == 1 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and words in p.stderr, p.stderr
