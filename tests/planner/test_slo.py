"""Latency targets in, the best layout out (``python -m planner --tpot-ms T --ttft-ms F``).

Every expectation is derived from the planner's own outputs (the plan without targets, each
layout's own ``predict`` command), never a number written here: the serving model's numbers
move when it changes, the logic under the targets must hold whatever they are.
"""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from planner.cli import main as planner_main
from planner.predict import build_parser as predict_parser
from planner.predict import run as predict_run
from planner.tradeoff.slo import Targets, meet_targets

POWERS = [2**k for k in range(10)]  # 1..512
# Two hosts (NVLink, PCIe-only with hypotheses and blocked layouts that fit), each on its
# own grid: every integer, and powers of two (the grid's next concurrency is then 2x).
HOSTS = {
    "h200": (["--model", "minimax-m2.5", "--host", "h200-sxm-8x"], "1-512"),
    "rtx": (["--model", "kimi-k2.5", "--host", "rtx-pro-6000-pcie-8x"], ",".join(map(str, POWERS))),
}
# Two pairs of targets, as (concurrency, factor) on the first recommendable layout's own
# curve: TPOT from one point, TTFT from another. Strict ones (TPOT binds at low
# concurrency), and loose ones where layouts reach far apart concurrencies (TTFT binds).
PAIRS = {"strict": ((16, 1.031), (256, 1.013)), "loose": ((512, 1.02), (64, 1.5))}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = planner_main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def plan_json(capsys, *argv: str) -> dict:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def predict_points(command: str, concurrencies: list[int]) -> list[dict]:
    argv = shlex.split(command)[4:] + ["--concurrency", ",".join(map(str, concurrencies))]
    return predict_run(predict_parser().parse_args(argv))["points"]


def meets(point: dict, tpot: float, ttft: float) -> bool:
    return point["tpot_ms"] <= tpot and point["ttft_ms"] <= ttft


def recommendable(lay: dict) -> bool:
    return lay["compliant"] and not lay["hypothesis"] and not lay["why_not"]


def targets_for(base: dict, pair: tuple) -> tuple[float, float]:
    """The pair's targets on the first recommendable layout's own points."""
    lay = next(x for x in base["layouts"] if recommendable(x))
    at = {p["concurrency"]: p for p in lay["points"]}
    (c_tpot, f_tpot), (c_ttft, f_ttft) = pair
    return at[c_tpot]["tpot_ms"] * f_tpot, at[c_ttft]["ttft_ms"] * f_ttft


@pytest.mark.parametrize("pair", PAIRS, ids=str)
@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_each_layouts_predict_meets_the_targets_at_its_max_and_misses_one_next(
    capsys, host: str, pair: str
) -> None:  # fmt: skip
    argv, grid_text = HOSTS[host]
    argv = [*argv, "--concurrency", grid_text]
    grid = list(range(1, 513)) if grid_text == "1-512" else POWERS
    tpot, ttft = targets_for(plan_json(capsys, *argv), PAIRS[pair])
    data = plan_json(capsys, *argv, "--tpot-ms", str(tpot), "--ttft-ms", str(ttft))
    slo = data["slo"]
    assert set(slo) == {"tpot_ms", "ttft_ms", "stat", "best", "per_layout"}
    assert (slo["tpot_ms"], slo["ttft_ms"], slo["stat"]) == (tpot, ttft, "mean")
    assert [x["layout"] for x in slo["per_layout"]] == [x["name"] for x in data["layouts"]]
    layouts = {x["name"]: x for x in data["layouts"]}
    found = 0
    for row in slo["per_layout"]:
        assert set(row) == {"layout", "max_concurrency", "output_tok_s_per_gpu"}
        lay, c = layouts[row["layout"]], row["max_concurrency"]
        if c is None:
            assert row["output_tok_s_per_gpu"] is None
            if not lay["why_not"] and len(grid) <= 64:  # predict answers 64 points at most
                assert not any(meets(p, tpot, ttft) for p in predict_points(lay["predict"], grid))
            continue
        found += 1
        later = [g for g in grid if g > c]
        points = predict_points(lay["predict"], [c, *later[:1]])
        assert meets(points[0], tpot, ttft), (row, points[0])
        if later:
            assert not meets(points[1], tpot, ttft), (row, points[1])
        gpus = data["gpu_count"]
        assert row["output_tok_s_per_gpu"] == pytest.approx(points[0]["output_tok_s"] / gpus,
                                                            rel=2e-3)  # fmt: skip
    assert found >= 2, "the targets should leave more than one layout to compare"
    ranked = sorted((r for r in slo["per_layout"] if r["max_concurrency"] is not None
                     and recommendable(layouts[r["layout"]])),
                    key=lambda r: r["output_tok_s_per_gpu"], reverse=True)  # fmt: skip
    best = slo["best"]
    assert best is not None and best["layout"] == ranked[0]["layout"]
    assert best["concurrency"] == ranked[0]["max_concurrency"]
    assert best["output_tok_s_per_gpu"] == ranked[0]["output_tok_s_per_gpu"]
    point = predict_points(layouts[best["layout"]]["predict"], [best["concurrency"]])[0]
    assert best["tpot_ms"] == pytest.approx(point["tpot_ms"], abs=1e-3)
    assert best["ttft_ms"] == pytest.approx(point["ttft_ms"], abs=0.01)


def test_text_report_starts_with_the_answer_and_the_runner_up(capsys) -> None:
    argv = [*HOSTS["rtx"][0], "--concurrency", HOSTS["rtx"][1]]
    tpot, ttft = targets_for(plan_json(capsys, *argv), PAIRS["strict"])
    flags = ["--tpot-ms", str(tpot), "--ttft-ms", str(ttft)]
    slo = plan_json(capsys, *argv, *flags)["slo"]
    code, out, _ = cli(capsys, *argv, *flags)
    assert code == 0
    lines = out.splitlines()
    best = slo["best"]
    assert lines[0].startswith(f"Answer: {best['layout']} serves the most within mean TPOT <= "
                               f"{tpot:g} ms and TTFT <= {ttft:g} ms: "
                               f"{best['output_tok_s_per_gpu']:.1f} output tokens/s per GPU at "
                               f"concurrency {best['concurrency']}")  # fmt: skip
    others = sorted((r for r in slo["per_layout"] if r["max_concurrency"] is not None
                     and r["layout"] != best["layout"]), key=lambda r: -r["output_tok_s_per_gpu"])
    assert lines[1].startswith("Runner-up: ") or lines[1].startswith("No other")
    if lines[1].startswith("Runner-up: "):
        name = lines[1].removeprefix("Runner-up: ").split(", ")[0]
        assert name in [r["layout"] for r in others]
        if "too close to call" in lines[1]:  # then the commands that measure both follow
            assert lines[2].startswith(f"  {best['layout']} [vllm]: python -m collectors")
            assert any(x.startswith(f"  {name} [") for x in lines[2:8])
    # Without targets the report still leads with its answer: the headline.
    code, out, _ = cli(capsys, *argv)
    assert out.splitlines()[0].startswith("Answer: ")


@pytest.mark.parametrize("which", ["TPOT", "TTFT"])
def test_nothing_meets_the_targets_says_which_fails_first_and_by_how_much(capsys,
                                                                          which: str) -> None:  # fmt: skip
    argv = [*HOSTS["h200"][0], "--concurrency", ",".join(map(str, POWERS))]
    base = plan_json(capsys, *argv)
    live = [x for x in base["layouts"] if recommendable(x)]
    key = "tpot_ms" if which == "TPOT" else "ttft_ms"
    # The lowest predicted value of any recommendable layout anywhere on the grid, halved:
    # nothing meets it, and the closest point is that lowest one.
    low = min(p[key] for x in live for p in x["points"])
    tight, loose = low / 2, 1e9
    tpot, ttft = (tight, loose) if which == "TPOT" else (loose, tight)
    data = plan_json(capsys, *argv, "--tpot-ms", str(tpot), "--ttft-ms", str(ttft))
    assert data["slo"]["best"] is None
    assert all(r["max_concurrency"] is None for r in data["slo"]["per_layout"])
    code, out, _ = cli(capsys, *argv, "--tpot-ms", str(tpot), "--ttft-ms", str(ttft))
    first = out.splitlines()[0]
    assert first.startswith("Answer: Nothing meets") and f"where {which} fails first" in first
    assert f"{low:.2f} ms against {tight:g} ms (+{low - tight:.2f} ms, +100%)" in first


def test_p90_uses_the_percentiles_where_predictions_carry_them(capsys) -> None:
    """The plan's curves carry the simulated benchmark's percentiles; percentiles 30% / 50%
    over the mean must answer as the mean does under targets 1.3x / 1.5x tighter; without
    them the mean stands in and the answer says so."""
    from planner.specs import hardware, models
    from planner.tradeoff.plan import plan

    res = plan(models.preset("deepseek-v3"), hardware.preset("h200-sxm-8x"),
               concurrencies=POWERS)  # fmt: skip
    tpot = float(np.nanmedian(res.layouts[0].curve.tpot_ms)) * 1.04
    ttft = float(np.nanmedian(res.layouts[0].curve.ttft_ms)) * 3.1
    assert meet_targets(res, Targets(tpot, ttft, "p90")).stat == "p90"  # the simulation's
    carried = [r.curve.percentiles for r in res.layouts]
    for r in res.layouts:
        r.curve.percentiles = {}
    plain = meet_targets(res, Targets(tpot, ttft, "p90"))
    assert plain.stat == "mean" and "the mean stands in" in plain.stat_note()
    for r, pct in zip(res.layouts, carried, strict=True):
        r.curve.percentiles = pct
    scaled = meet_targets(res, Targets(tpot / 1.3, ttft / 1.5))
    for r in res.layouts:
        c = r.curve
        c.percentiles = {"tpot_ms": {"p90": c.tpot_ms * 1.3}, "ttft_ms": {"p90": c.ttft_ms * 1.5}}
    p90 = meet_targets(res, Targets(tpot, ttft, "p90"))
    assert p90.stat == "p90" and p90.stat_note() == ""
    got = [(x.layout, x.max_concurrency) for x in p90.per_layout]
    assert got == [(x.layout, x.max_concurrency) for x in scaled.per_layout]
    assert any(c is not None for _, c in got)
    assert p90.best.tpot_ms == pytest.approx(scaled.best.tpot_ms * 1.3)
    # The CLI answers on the simulated benchmark's p90 (issue 55), with no note.
    code, out, err = cli(capsys, *HOSTS["h200"][0], "--concurrency", "1,8,64", "--tpot-ms",
                         str(tpot), "--ttft-ms", str(ttft), "--slo-stat", "p90", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["slo"]["stat"] == "p90"
    assert err == ""


def test_the_runner_up_band_decides_too_close_to_call() -> None:
    from planner.specs import hardware, models
    from planner.tradeoff.plan import plan

    res = plan(models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x"),
               concurrencies=POWERS)  # fmt: skip
    for tpot in (20.0, 40.0, 80.0):
        ans = meet_targets(res, Targets(tpot, 1e6))
        for x in (ans.best, ans.runner_up):
            if x is not None:
                assert x.tok_s_low < x.tok_s_per_gpu < x.tok_s_high
        if ans.runner_up is not None:
            overlap = ans.runner_up.tok_s_high >= ans.best.tok_s_low
            assert ans.too_close == overlap
            assert ("too close to call" in ans.runner_up_sentence()) == overlap


@pytest.mark.parametrize("args, message", [
    (["--tpot-ms", "50"], "latency targets: give both --tpot-ms T and --ttft-ms F"),
    (["--tpot-ms", "0", "--ttft-ms", "2000"], "--tpot-ms 0.0: a target in milliseconds > 0"),
    (["--tpot-ms", "50", "--ttft-ms", "nan"], "--ttft-ms nan: a target in milliseconds > 0"),
    (["--tpot-ms", "inf", "--ttft-ms", "9"], "--tpot-ms inf: a target in milliseconds > 0"),
    (["--slo-stat", "p90"], "--slo-stat: give the targets too (--tpot-ms T --ttft-ms F)"),
])  # fmt: skip
def test_bad_targets_are_one_line_exit_1(capsys, args: list[str], message: str) -> None:
    code, out, err = cli(capsys, *HOSTS["h200"][0], *args)
    assert (code, out, err) == (1, "", f"planner: {message}\n")
