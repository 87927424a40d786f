"""Physics cannot be beaten: on every real trace whose model is known, no category's measured
time per step is below its floor, and the step's floors sum below the measured step.

The traces are real vLLM and SGLang decode steps on an AMD MI300X (tests/fixtures/traces/
tracelens); their models' config.json files are copied beside them (tests/fixtures/serving/
configs). A floor with wrong bytes (every layer's KV instead of the window's, experts counted
twice, a wrong category) lands above a measured time here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import FIXTURES, run_cli
from tests.trace.conftest import fixture

CONFIGS = FIXTURES / "serving" / "configs"
GPT_OSS = CONFIGS / "openai--gpt-oss-20b_config.json"
QWEN3_8B = CONFIGS / "Qwen--Qwen3-8B_config.json"
# (trace, its model's config, --host where the trace's deviceProperties name no GPU)
KNOWN = [
    ("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz", GPT_OSS, "MI300X"),
    ("tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz", GPT_OSS, "MI300X"),
    ("tracelens/sglang_qwen3_8b_decode.json.gz", QWEN3_8B, None),
]
BYTES_FLOORED = {"gemm", "moe", "attention"}  # floors from the model's bytes, not launches


@pytest.fixture(scope="module")
def floors(tmp_path_factory) -> dict[str, dict]:
    """Each trace imported with its model, then floored from the store."""
    store = tmp_path_factory.mktemp("floors") / "stepscope.duckdb"
    out = {}
    for rel, config, host in KNOWN:
        imported = run_cli(store, "trace", str(fixture(rel)), "--model", str(config), "--json")
        assert imported.code == 0, imported.stderr
        args = ["floor", imported.json["run_id"], "--json"] + (["--host", host] if host else [])
        res = run_cli(store, *args)
        assert res.code == 0, res.stderr
        out[rel] = {"import": imported.json, "floor": res.json}
    return out


@pytest.mark.parametrize("rel", [k[0] for k in KNOWN])
def test_no_category_beats_its_floor(floors, rel: str) -> None:
    got = floors[rel]["floor"]
    assert got["missing"] == []  # model, host, batch and context all known
    cats = got["categories"]
    assert BYTES_FLOORED & set(cats)  # the trace has the step's big parts
    for cat, c in cats.items():
        assert c["floor_us_per_step"] is not None, cat
        assert 0 < c["floor_us_per_step"] <= c["measured_us_per_step"], (cat, c)
    for cat in BYTES_FLOORED & set(cats):  # bytes or FLOPs decide, not the launch floor
        assert " GB / 5,300 GB/s" in cats[cat]["assumption"], cats[cat]["assumption"]
        assert "launch floor" not in cats[cat]["assumption"]


@pytest.mark.parametrize("rel", [k[0] for k in KNOWN])
def test_the_sum_of_floors_is_below_the_step(floors, rel: str) -> None:
    got = floors[rel]["floor"]
    step = got["step"]
    total = sum(c["floor_us_per_step"] for c in got["categories"].values())
    assert step["floor_us"] == pytest.approx(total, rel=1e-6)
    assert 0 < step["floor_us"] < step["measured_us"]


def test_floors_have_the_size_the_shapes_give(floors) -> None:
    """gpt-oss-20b at batch 32 and 55,086 KV tokens on a 5.3 TB/s MI300X: every expert's MXFP4
    weights (31.6 of 32 touched), 1.27 GB of BF16 attention projections plus the 1.16 GB LM
    head, and 12 full layers' KV (+ 12 windowed layers of 128 tokens)."""
    cats = floors[KNOWN[0][0]]["floor"]["categories"]
    assert cats["moe"]["floor_us_per_step"] == pytest.approx(1889, rel=0.01)
    assert cats["gemm"]["floor_us_per_step"] == pytest.approx(469, rel=0.01)
    assert cats["attention"]["floor_us_per_step"] == pytest.approx(274, rel=0.01)
    # the mixed step: 8,192 tokens through the experts are compute-bound at the BF16 peak
    mixed = floors[KNOWN[1][0]]["floor"]["categories"]
    assert "1,307 TFLOPS" in mixed["moe"]["assumption"]
    assert mixed["moe"]["floor_us_per_step"] > 10 * cats["moe"]["floor_us_per_step"]


def test_trace_json_gives_the_same_floors_as_the_stored_run(floors) -> None:
    """SGLang's trace names its GPU, so its import already knows every input."""
    rel = KNOWN[2][0]
    assert floors[rel]["import"]["floors"] == floors[rel]["floor"]


def test_inputs_a_trace_lacks_are_named_not_guessed(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    imported = run_cli(store, "trace", str(fixture(KNOWN[0][0])), "--json")
    assert imported.code == 0, imported.stderr
    got = imported.json["floors"]
    missing = " ".join(got["missing"])
    assert "model:" in missing and "--model" in missing
    assert "host:" in missing and "names no GPU" in missing
    for cat, c in got["categories"].items():  # launch floors only: still floors
        assert "launch floor" in c["assumption"], cat
        assert c["floor_us_per_step"] <= c["measured_us_per_step"]
    floor = run_cli(store, "floor", imported.json["run_id"])
    assert floor.code == 0
    assert "Missing:" in floor.stdout and "missing model:" in floor.stderr
