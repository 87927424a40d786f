"""The served model's config.json is recorded with vllm-profile and vllm-bench runs.

Where it is looked for follows huggingface_hub's cache layout (``models--ORG--NAME/
snapshots/<rev>/``, ``refs/main``) and vLLM's ``/v1/models`` card, whose ``root`` is the
checkpoint directory (vllm/entrypoints/openai/serving_models.py, ``ModelCard.root``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, query, run_cli
from tests.vllm import bench_fixtures

KIMI = FIXTURES / "serving" / "configs" / "moonshotai--Kimi-K2.5_config.json"
pytestmark = pytest.mark.skipif(not KIMI.is_file(), reason="tests/fixtures not present")


def _hub_cache(root: Path, model_id: str, rev: str = "0123abc") -> Path:
    """An HF hub cache holding ``model_id``'s config at revision ``rev`` (refs/main -> rev)."""
    repo = root / ("models--" + model_id.replace("/", "--"))
    (repo / "snapshots" / rev).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    target = repo / "snapshots" / rev / "config.json"
    shutil.copy(KIMI, target)
    return target


def test_bench_import_records_the_config_from_the_hf_cache(tmp_path: Path, store_path: Path):
    target = _hub_cache(tmp_path / "hub", "moonshotai/Kimi-K2.5")
    bench_fixtures.write_sweep(tmp_path / "tp8", levels=(1, 4), tp=8)
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json",
                  HF_HUB_CACHE=str(tmp_path / "hub"))  # fmt: skip
    assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT model_id, source_path, config_json FROM "
                 "v_serving_model_config WHERE run_id = ?", [res.json["run_id"]])  # fmt: skip
    assert len(rows) == 1
    model_id, source, text = rows[0]
    assert model_id == "moonshotai/Kimi-K2.5" and source == str(target)
    assert json.loads(text) == json.loads(KIMI.read_text())


def test_bench_import_without_the_model_on_this_host_records_nothing(tmp_path, store_path):
    bench_fixtures.write_sweep(tmp_path / "tp8", levels=(1,), tp=8)
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json",
                  HF_HUB_CACHE=str(tmp_path / "empty-hub"))  # fmt: skip
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT count(*) FROM v_serving_model_config") == [(0,)]


def test_profile_records_the_config_from_the_servers_model_root(vllm_server, rank_traces,
                                                                 store_path, tmp_path):  # fmt: skip
    checkpoint = tmp_path / "models" / "kimi"
    checkpoint.mkdir(parents=True)
    shutil.copy(KIMI, checkpoint / "config.json")
    server = vllm_server(traces=rank_traces, root=str(checkpoint))
    res = run_cli(store_path, "vllm-profile", "--url", server.url, "--trace-dir",
                  str(server.trace_dir), "--num-requests", "4", "--concurrency", "2",
                  "--input-len", "8", "--output-len", "8", "--settle", "1",
                  "--flush-timeout", "30", "--json", HF_HUB_CACHE=str(tmp_path / "empty-hub"))  # fmt: skip
    assert res.code == 0, res.stderr
    rows = query(store_path, "SELECT source_path FROM v_serving_model_config WHERE run_id = ?",
                 [res.json["run_id"]])  # fmt: skip
    assert rows == [(str(checkpoint / "config.json"),)]
