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

from planner.api import config_fields, models
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
    # the planner's fields of the file, never the file: the same model, nothing else
    whole = json.loads(KIMI.read_text())
    assert json.loads(text) == config_fields.planner_fields(whole) != whole
    assert models.from_config(json.loads(text)) == models.from_config(whole)


def test_bench_import_without_the_model_on_this_host_records_nothing(tmp_path, store_path):
    bench_fixtures.write_sweep(tmp_path / "tp8", levels=(1,), tp=8)
    res = run_cli(store_path, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json",
                  HF_HUB_CACHE=str(tmp_path / "empty-hub"))  # fmt: skip
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT count(*) FROM v_serving_model_config") == [(0,)]


def test_profile_reads_the_model_folder_the_user_names_never_the_servers_root(
        vllm_server, rank_traces, store_path, tmp_path):  # fmt: skip
    """The server's ``root`` is a name it reports, recorded as such; only ``--model-dir``
    (a folder the user names) is read (issue 60)."""
    checkpoint = tmp_path / "models" / "kimi"
    checkpoint.mkdir(parents=True)
    shutil.copy(KIMI, checkpoint / "config.json")
    server = vllm_server(traces=rank_traces, root=str(checkpoint))
    common = ["--url", server.url, "--trace-dir", str(server.trace_dir), "--num-requests", "4",
              "--concurrency", "2", "--input-len", "8", "--output-len", "8", "--settle", "1",
              "--flush-timeout", "30", "--json"]  # fmt: skip
    hub = str(tmp_path / "empty-hub")
    for extra, expected in (([], []), (["--model-dir", str(checkpoint)],
                                       [(str(checkpoint / "config.json"),)])):  # fmt: skip
        res = run_cli(store_path, "vllm-profile", *common, *extra, HF_HUB_CACHE=hub)
        assert res.code == 0, res.stderr
        rows = query(store_path, "SELECT source_path FROM v_serving_model_config WHERE "
                     "run_id = ?", [res.json["run_id"]])  # fmt: skip
        assert rows == expected
        root = query(store_path, "SELECT model_root FROM vllm_server WHERE run_id = ?",
                     [res.json["run_id"]])  # fmt: skip
        assert root == [(str(checkpoint),)]
