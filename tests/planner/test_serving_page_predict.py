"""The Serving page's prediction rows (pages/helpers/serving_predict.py) on a real store: a sweep
imported by the real `vllm-bench` CLI, a `gpu` run through the NVML stand-in, and the served
model's config.json recorded as the collectors record it (migration 0008)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from collectors.serving.model_config import model_config_tables
from pages.helpers.serving_predict import add_band, serving_predictions
from planner.specs import hardware, models
from store.commit import commit_entry
from store.location import resolve
from store.queries import planner as qp
from store.queries import serving as qs
from store.spool.bundle import Bundle, RunRecord, new_run_id, utc_now_iso, write_spool
from tests.gpu.conftest import PCIE, fake_env
from tests.helpers import FIXTURES, run_cli
from tests.vllm import bench_fixtures

HOST = "gpu-node-7"
MODEL = "moonshotai/Kimi-K2.5"
KIMI = FIXTURES / "serving" / "configs" / "moonshotai--Kimi-K2.5_config.json"
MEASURED = "measured"


# What pages/serving.py passes in (importing that page module would run the page).
def hardware_for(loc, choice: str, host: str):
    if choice != MEASURED:
        return hardware.preset(choice), None
    head, devices = qp.gpu_run(loc, qp.latest_gpu_run_id(loc, host))
    return hardware.from_gpu_run(head.iloc[0].to_dict(), devices.to_dict("records")), None


def model_for(model_id: str):
    name = models.preset_for_name(model_id)
    return (models.preset(name), None) if name else (None, f"{model_id}: no preset")


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serving-predict")
    store = tmp / "stepscope.duckdb"
    assert run_cli(store, "gpu", "--host", HOST, **fake_env(PCIE)).code == 0
    bench_fixtures.write_sweep(tmp / "tp8", tp=8)
    res = run_cli(store, "vllm-bench", "--results", str(tmp / "tp8"), "--host", HOST, "--json")
    assert res.code == 0, res.stderr
    return resolve(store), res.json["run_id"], tmp


def _bench(loc, run_id):
    return qs.bench_results(loc, [run_id], MODEL)


def test_predicts_every_measured_point_and_calibrates(stored) -> None:
    loc, run_id, _ = stored
    frame, reasons = serving_predictions(loc, _bench(loc, run_id), MODEL, MEASURED,
                                         hardware_for, model_for, calibrated=True)  # fmt: skip
    assert not reasons
    assert sorted(frame["concurrency"]) == [1, 4, 16, 64]
    assert (frame["predicted_tpot_ms"] > 0).all() and (frame["predicted_ttft_ms"] > 0).all()
    # The calibration is drawn only where it predicted a point it held back: one layout's
    # sweep holds back its top concurrencies (here 64), fitted without them.
    held = frame.dropna(subset=["calibrated_tpot_ms"]).set_index("concurrency")
    assert list(held.index) == [64]
    # every prediction carries the band of the model's measured error (vLLM, this format)
    assert (frame["predicted_tpot_low_ms"] < frame["predicted_tpot_high_ms"]).all()
    assert (frame["predicted_ttft_low_ms"] < frame["predicted_ttft_high_ms"]).all()
    assert frame["band"].iloc[0].startswith("vllm/int4: measured within")
    # Calibration is opt-in (seconds per host): without it no point is drawn calibrated.
    plain, _ = serving_predictions(loc, _bench(loc, run_id), MODEL, MEASURED, hardware_for,
                                   model_for)  # fmt: skip
    assert plain["calibrated_tpot_ms"].isna().all()
    assert plain["predicted_tpot_ms"].tolist() == frame["predicted_tpot_ms"].tolist()
    # ... and the Serving chart draws it as a shaded area around the dashed prediction
    fig = go.Figure()
    add_band(fig, frame, "#4C78A8", "TP=8 planner")
    (trace,) = fig.data
    assert trace.fill == "toself" and trace.name == "TP=8 planner band"
    assert max(trace.y) == pytest.approx(frame["predicted_tpot_high_ms"].max())
    assert frame["model_source"].iloc[0].startswith("preset kimi-k2.5")  # no stored config yet
    bench = _bench(loc, run_id).set_index("concurrency")["mean_tpot_ms"]
    err = lambda col: (held[col] / bench[held.index] - 1).abs().median()  # noqa: E731
    assert err("calibrated_tpot_ms") < err("predicted_tpot_ms")


def test_ttft_is_predicted_for_the_runs_own_prompt_count(stored) -> None:
    """The sweep sent 64 prompts at every concurrency: at C=64 every request is in the first
    wave (all arrive at once and queue), at C=1 most arrive alone. The page predicts each
    point for the prompts the run sent, not the fit's default share."""
    from pages.helpers.serving_predict import _serve_layout
    from planner.cost.serving import Workload, params_for_loaded_run, predict

    loc, run_id, _ = stored
    bench = _bench(loc, run_id)
    assert set(bench["num_prompts"]) == {64}
    frame, reasons = serving_predictions(loc, bench, MODEL, MEASURED, hardware_for, model_for)
    assert not reasons
    model, hw = model_for(MODEL)[0], hardware_for(loc, MEASURED, HOST)[0]
    lay = _serve_layout(bench.iloc[0].to_dict())
    params, _ = params_for_loaded_run(model, hw, lay, "vllm")

    def ttft(c: int, prompts: int) -> float:
        w = Workload(1024, 256, "vllm", num_prompts=prompts, bench="vllm")
        return float(predict(model, hw, lay, w, np.array([c]), params).ttft_ms[0])

    shown = frame.set_index("concurrency")["predicted_ttft_ms"]
    for c in (1, 4, 16, 64):
        assert shown[c] == pytest.approx(ttft(c, 64))
    assert shown[64] > 1.5 * ttft(64, 0)  # one wave against vllm bench serve's 1,000 prompts


def test_each_run_is_predicted_with_the_scheduler_it_was_launched_with(stored) -> None:
    """The same sweep imported again, its server launched with --max-num-batched-tokens 2048
    (recorded with the run): the page predicts its TTFT at that budget, not vLLM's default
    8192, says so, and leaves the first run at the default."""
    from pages.helpers.serving_predict import _serve_layout
    from planner.cost.serving import Workload, params_for_loaded_run, predict

    loc, first_id, tmp = stored
    args = f"vllm serve {MODEL} -tp 8 --max-num-batched-tokens 2048 --api-key sk-secret"
    res = run_cli(loc.path, "vllm-bench", "--results", str(tmp / "tp8"), "--host", HOST,
                  "--server-args", args, "--label", "budget-2048", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    run_id = res.json["run_id"]
    launched = qs.bench_server_args(loc, [run_id, first_id])
    assert set(launched) == {run_id} and "sk-secret" not in launched[run_id]
    bench = _bench(loc, run_id)
    frame, reasons = serving_predictions(loc, bench, MODEL, MEASURED, hardware_for, model_for)
    assert not reasons
    assert set(frame["launch_flags"]) == {"--max-num-batched-tokens 2048"}
    model, hw = model_for(MODEL)[0], hardware_for(loc, MEASURED, HOST)[0]
    lay = _serve_layout(bench.iloc[0].to_dict())
    params, _ = params_for_loaded_run(model, hw, lay, "vllm")

    def ttft(c: int, budget: int) -> float:
        w = Workload(1024, 256, "vllm", num_prompts=64, token_budget=budget, bench="vllm")
        return float(predict(model, hw, lay, w, np.array([c]), params).ttft_ms[0])

    shown = frame.set_index("concurrency")["predicted_ttft_ms"]
    for c in (1, 4, 16, 64):
        assert shown[c] == pytest.approx(ttft(c, 2048))
    # 64 one-wave prompts run two per 2,048-token step rather than eight per 8,192-token
    # step: a different first wave, so a different mean
    assert abs(shown[64] / ttft(64, 0) - 1) > 0.01
    first, _ = serving_predictions(loc, _bench(loc, first_id), MODEL, MEASURED, hardware_for,
                                   model_for)  # fmt: skip
    assert set(first["launch_flags"]) == {""}
    assert first.set_index("concurrency")["predicted_ttft_ms"][64] == pytest.approx(ttft(64, 0))


def test_two_engines_with_one_layout_are_predicted_apart(stored) -> None:
    """vLLM and SGLang runs of the same model, layout (TP8) and host: each point is predicted
    for its own engine (its band names it), not both for whichever run sorts first."""
    from tests.sglang import fixtures as sglang_fixtures

    loc, vllm_id, tmp = stored
    sglang_fixtures.write_jsonl(tmp / "sglang.jsonl", levels=(1, 4, 16, 64), tpot=7.5)
    res = run_cli(loc.path, "sglang-bench", "--results", str(tmp / "sglang.jsonl"), "--model",
                  MODEL, "--server-args", "--tp 8", "--sglang-version", "0.5.4", "--host", HOST,
                  "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    bench = qs.bench_results(loc, [vllm_id, res.json["run_id"]], MODEL)
    assert set(bench["layout_label"]) == {"TP8"}
    frame, reasons = serving_predictions(loc, bench, MODEL, MEASURED, hardware_for, model_for)
    assert not reasons
    by = frame.set_index(["engine", "concurrency"])
    assert sorted(set(frame["engine"])) == ["sglang", "vllm"]
    assert by.loc[("sglang", 1), "band"].startswith("sglang/")
    assert by.loc[("vllm", 1), "band"].startswith("vllm/")
    # SGLang's request path and separate prompt passes: its own TTFT, not vLLM's
    assert by.loc[("sglang", 16), "predicted_ttft_ms"] != pytest.approx(
        by.loc[("vllm", 16), "predicted_ttft_ms"], rel=0.05)  # fmt: skip


def test_an_sglang_run_is_predicted_with_what_its_server_reported(stored) -> None:
    """SGLang results that record the server's /get_server_info (bench_serving since
    88342607) need no --server-args: the layout, chunked_prefill_size and
    scheduler_recv_interval the server ran with are read from them and predicted with."""
    from pages.helpers.serving_predict import _serve_layout
    from planner.cost.serving import Workload, params_for_loaded_run, predict
    from tests.sglang import fixtures as sglang_fixtures

    loc, _, tmp = stored
    info = {"model_path": MODEL, "tp_size": 8, "dp_size": 1, "ep_size": 1,
            "chunked_prefill_size": 2048, "scheduler_recv_interval": 30, "version": "0.5.5"}
    sglang_fixtures.write_jsonl(tmp / "reported.jsonl", levels=(1, 16, 64), server_info=info)
    res = run_cli(loc.path, "sglang-bench", "--results", str(tmp / "reported.jsonl"), "--model",
                  MODEL, "--host", HOST, "--label", "reported", "--json")  # fmt: skip
    assert res.code == 0, res.stderr
    bench = _bench(loc, res.json["run_id"])
    assert set(bench["layout_label"]) == {"TP8"}
    frame, reasons = serving_predictions(loc, bench, MODEL, MEASURED, hardware_for, model_for)
    assert not reasons
    assert set(frame["launch_flags"]) == {"chunked_prefill_size=2048 (/get_server_info) "
                                          "scheduler_recv_interval=30 (/get_server_info)"}
    model, hw = model_for(MODEL)[0], hardware_for(loc, MEASURED, HOST)[0]
    lay = _serve_layout(bench.iloc[0].to_dict())
    params, _ = params_for_loaded_run(model, hw, lay, "sglang")

    def ttft(c: int, budget: int, recv: int) -> float:
        # SGLang's lines record no --num-prompts: the client's default is assumed (0), with
        # the fixed lengths the collectors' sweeps send
        w = Workload(1024, 256, "sglang", num_prompts=0, token_budget=budget,
                     recv_interval=recv, bench="vllm")  # fmt: skip
        return float(predict(model, hw, lay, w, np.array([c]), params).ttft_ms[0])

    shown = frame.set_index("concurrency")["predicted_ttft_ms"]
    for c in (1, 16, 64):
        assert shown[c] == pytest.approx(ttft(c, 2048, 30))
    assert shown[64] != pytest.approx(ttft(64, 0, 1), rel=0.02)  # not SGLang's defaults


@pytest.mark.skipif(not KIMI.is_file(), reason=f"{KIMI} absent")
def test_the_recorded_config_json_is_preferred_over_a_preset(stored, tmp_path: Path) -> None:
    loc, run_id, _ = stored
    snap = tmp_path / "hub" / "models--moonshotai--Kimi-K2.5" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(KIMI.read_text())
    tables = model_config_tables(MODEL, None, {"HF_HUB_CACHE": str(tmp_path / "hub")})
    now = utc_now_iso()
    run = RunRecord(new_run_id("vllm-bench"), "vllm-bench", HOST, now, now)
    commit_entry(loc, write_spool(Bundle(run, tables), loc.spool_dir))
    frame, reasons = serving_predictions(loc, _bench(loc, run_id), MODEL, "rtx-pro-6000-pcie-8x",
                                         hardware_for, model_for)  # fmt: skip
    assert not reasons
    assert f"recorded with run {run.run_id}" in frame["model_source"].iloc[0]
    assert json.loads(KIMI.read_text())["architectures"]


@pytest.mark.skipif(not KIMI.is_file(), reason=f"{KIMI} absent")
def test_a_host_without_a_recorded_config_takes_the_newest_of_any_host(stored,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """The configs are read once for every host the page shows: a host's own comes first,
    a host with none takes the newest recorded on any host."""
    from pages.helpers.serving_predict import stored_model

    loc, _, _ = stored
    snap = tmp_path / "hub" / "models--moonshotai--Kimi-K2.5" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(KIMI.read_text())
    tables = model_config_tables(MODEL, None, {"HF_HUB_CACHE": str(tmp_path / "hub")})
    ids = {}
    for host in ("older-host", "newer-host"):
        now = utc_now_iso()
        run = RunRecord(new_run_id("vllm-bench"), "vllm-bench", host, now, now)
        commit_entry(loc, write_spool(Bundle(run, tables), loc.spool_dir))
        ids[host] = run.run_id
    for host, expected in (("older-host", "older-host"), ("newer-host", "newer-host"),
                           ("no-config-host", "newer-host")):  # fmt: skip
        spec, source = stored_model(loc, MODEL, host)
        assert spec is not None and f"recorded with run {ids[expected]}" in source, host
