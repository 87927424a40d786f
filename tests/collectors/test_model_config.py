"""collectors.serving.model_config: find a served model's config.json on this host (local directory
or the HF hub cache layout) and record it with the run in the real store."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from collectors.serving.model_config import TABLE, find, hub_cache, model_config_tables
from planner.cost.serving import ServeLayout, Workload, predict
from planner.specs import hardware, models
from store.commit import commit_entry
from store.location import resolve
from store.queries import planner as qp
from store.spool.bundle import Bundle, RunRecord, new_run_id, utc_now_iso, write_spool
from tests.helpers import FIXTURES

CONFIGS = FIXTURES / "serving" / "configs"
needs_configs = pytest.mark.skipif(not CONFIGS.is_dir(), reason=f"{CONFIGS} absent")
CFG = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "vocab_size": 100, "torch_dtype": "bfloat16"}  # fmt: skip


def snapshot(cache: Path, repo: str, rev: str, cfg: dict, quant: dict | None = None) -> Path:
    d = cache / ("models--" + repo.replace("/", "--")) / "snapshots" / rev
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg))
    if quant is not None:
        (d / "hf_quant_config.json").write_text(json.dumps(quant))
    return d


def test_hub_cache_location_follows_hf_env() -> None:
    assert hub_cache({"HF_HUB_CACHE": "/x/hub"}) == Path("/x/hub")
    assert hub_cache({"HF_HOME": "/y"}) == Path("/y/hub")
    assert hub_cache({}) == Path("~/.cache/huggingface/hub").expanduser()


def test_local_model_directory_wins(tmp_path: Path) -> None:
    d = tmp_path / "Kimi"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CFG))
    found, why = find("moonshotai/Kimi-K2.5", str(d), env={"HF_HOME": str(tmp_path / "none")})
    assert found is not None and found.source_path == str(d / "config.json")
    assert json.loads(found.config_json) == CFG and found.quant_config_json is None
    assert str(d) in why


def test_hf_cache_refs_main_then_newest_snapshot(tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    old = snapshot(cache, "org/m", "aaa", {**CFG, "hidden_size": 32})
    new = snapshot(cache, "org/m", "bbb", {**CFG, "hidden_size": 128}, {"quantization": {}})
    past = time.time() - 100
    os.utime(old / "config.json", (past, past))
    env = {"HF_HUB_CACHE": str(cache)}
    found, _ = find("org/m", None, env)
    assert found.source_path == str(new / "config.json")  # newest when no refs/main
    assert found.quant_config_json is not None
    (cache / "models--org--m" / "refs").mkdir()
    (cache / "models--org--m" / "refs" / "main").write_text("aaa\n")
    found, _ = find("org/m", None, env)
    assert found.source_path == str(old / "config.json")  # the revision refs/main names


def test_missing_or_broken_config_gives_no_table_and_a_reason(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    found, why = find("org/absent", None, env)
    assert found is None and "org/absent" in why and "not found" in why
    d = snapshot(tmp_path / "hub", "org/broken", "r1", CFG)
    (d / "config.json").write_text("{not json")
    assert model_config_tables("org/broken", None, env) == {}
    assert model_config_tables(None, None, env) == {}


@needs_configs
def test_recorded_config_round_trips_through_the_store_into_a_prediction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEPSCOPE_SPOOL", raising=False)
    cache = tmp_path / "hub"
    src = CONFIGS / "nvidia--DeepSeek-V3.1-NVFP4_config.json"
    quant = json.loads((CONFIGS / "nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json").read_text())
    snapshot(cache, "nvidia/DeepSeek-V3.1-NVFP4", "r1", json.loads(src.read_text()), quant)
    tables = model_config_tables("nvidia/DeepSeek-V3.1-NVFP4", None, {"HF_HUB_CACHE": str(cache)})
    assert list(tables) == [TABLE]
    loc = resolve(tmp_path / "s" / "stepscope.duckdb")
    now = utc_now_iso()
    run = RunRecord(new_run_id("vllm-bench"), "vllm-bench", "node1", now, now)
    commit_entry(loc, write_spool(Bundle(run, tables), loc.spool_dir))
    rows = qp.model_configs(loc, "nvidia/DeepSeek-V3.1-NVFP4", "node1")
    assert len(rows) == 1 and rows["run_id"].iloc[0] == run.run_id
    cfg = models.with_modelopt(json.loads(rows["config_json"].iloc[0]),
                               json.loads(rows["quant_config_json"].iloc[0]))  # fmt: skip
    m = models.from_config(cfg, name="stored")
    assert m.native.weights == "nvfp4"
    pr = predict(m, hardware.preset("b200-sxm-8x"), ServeLayout(tp=8, moe_tp=8),
                 Workload(1024, 1024), np.array([8]))  # fmt: skip
    assert pr.tpot_ms[0] > 0
    assert qp.model_configs(loc, "other/model").empty
