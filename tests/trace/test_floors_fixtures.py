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

from tests.helpers import FIXTURES, run_cli, run_in_process
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


# ---- issue 57: floors are lower bounds, with the project's real nccl-tests logs in the store
NCCL_LOGS = sorted((FIXTURES / "nccl").glob("*.log"))
EVERY_TRACE = {  # every real trace of tests/fixtures: (files, --model where its model is known)
    "vllm_fullgraph": (["tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz"], GPT_OSS),
    "vllm_piecewise": (["tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz"], GPT_OSS),
    "sglang": (["tracelens/sglang_qwen3_8b_decode.json.gz"], QWEN3_8B),
    "h100": (["tracelens/h100_qwen1.5_0.5b.json.gz"], None),
    "hta": (["hta/sampled_rank-0.json.gz", "hta/sampled_rank-1.json.gz"], None),
    "hta_ns": (["hta/ns_resolution_rank-0.pt.trace.json.gz"], None),
    "dlrm": (["param/dlrm_kineto"], None),
    "nsys_cloverleaf": ([str(FIXTURES / "nsys" / "pipit_cloverleaf_nsys2024.5.sqlite")], None),
    "nsys_saxpy": ([str(FIXTURES / "nsys" / "pipit_saxpy_mpi_nsys2022.2.sqlite")], None),
}


@pytest.fixture(scope="module")
def one_host(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Every real trace and every real nccl-tests log imported as one host's (a laptop
    importing them all under one name: the case that mixed curves across GPUs)."""
    store = tmp_path_factory.mktemp("one-host") / "stepscope.duckdb"
    for log in NCCL_LOGS:
        res = run_cli(store, "nccl-tests", str(log), "--host", "lab")
        assert res.code == 0, res.stderr
    runs = {}
    for name, (files, model) in EVERY_TRACE.items():
        paths = [f if f.startswith("/") else str(fixture(f)) for f in files]
        res = run_cli(store, "trace", *paths, "--host", "lab", "--json",
                      *(["--model", str(model)] if model else []))  # fmt: skip
        assert res.code == 0, res.stderr
        runs[name] = res.json["run_id"]
    return store, runs


@pytest.mark.parametrize("name", list(EVERY_TRACE))
def test_no_floor_exceeds_its_measurement_on_any_real_trace(one_host, name: str) -> None:
    store, runs = one_host
    host = ["--host", "MI300X"] if name.startswith("vllm") else []  # it names no GPU
    res = run_in_process(store, "floor", runs[name], "--json", *host)
    assert res.code == 0, res.stderr
    got = res.json
    for rank in [got, *got.get("per_rank", {}).values()]:
        for cat, c in rank["categories"].items():
            assert c["input_error"] is None, (cat, c)
            if c["floor_us_per_step"] is not None:
                assert c["floor_us_per_step"] <= c["measured_us_per_step"], (cat, c)
    assert "input error" not in run_in_process(store, "floor", runs[name], *host).stdout


def test_a_forced_mismatch_is_an_input_error_with_no_ratio(one_host) -> None:
    """100,000 sequences forced on a step that ran 32: the bytes floors land far above the
    measured times, and the report names the inputs instead of a ratio or a win."""
    store, runs = one_host
    args = ["floor", runs["vllm_fullgraph"], "--host", "MI300X", "--batch", "100000"]
    got = run_in_process(store, *args, "--json").json
    wrong = {c for c, v in got["categories"].items() if v["input_error"]}
    assert {"gemm", "moe", "attention"} <= wrong
    assert "the batch or the context (batch 100000" in got["categories"]["attention"]["input_error"]
    assert got["step"]["floor_us"] < got["step"]["measured_us"]  # the step leaves them out
    text = run_in_process(store, *args)
    assert text.code == 0
    rows = {line.split()[0]: line for line in text.stdout.splitlines() if line.strip()}
    assert rows["attention"].rstrip().endswith("input error               -")
    assert "Input errors (a floor above its measured time is no result):" in text.stdout
    assert "input error: attention: its floor" in text.stderr


def test_a_collective_floor_above_its_measurement_names_the_comm_curve(one_host) -> None:
    """The real 8x H100 bandwidth run as the host's AllReduce curve, and a step whose 100
    AllReduces took 3 us each: under its 6 us spec latency, so the curve (and its sizes) or
    the calls are wrong, said as such."""
    from planner.floor_inputs import RunFacts, resolve
    from planner.floor_report import build

    store, _ = one_host
    facts = RunFacts(host="lab", world_size=8, devices=("NVIDIA H100 80GB HBM3",))
    inp = resolve(facts, str(QWEN3_8B), None, 32, 1000.0, str(store))
    steps = [{"rank": 0, "step": 0, "wall_us": 20000.0, "source": "test"}]
    cats = [{"rank": 0, "step": 0, "category": "allreduce", "calls": 100, "total_us": 300.0}]
    (c,) = build(inp, steps, cats).busiest.categories
    assert c.ratio is None and c.win_us is None
    assert "the comm curve and its sizes, or the calls" in c.input_error
    assert "all_reduce measured 128 MiB-4 GiB;" in c.input_error
    assert "from the spec latency of H100 plus the measured bandwidth" in c.input_error


def test_the_kernel_page_shows_an_input_error_the_same_way(one_host, monkeypatch) -> None:
    """The Kernel page (Streamlit's AppTest) with the same forced batch: an error naming the
    inputs, no ratio and nothing to win in its row, and no floor bar for it."""
    from store import reader
    from tests.pages.apptest import new_app, unescaped

    store, runs = one_host
    monkeypatch.setenv("STEPSCOPE_STORE", str(store))
    reader.clear_cache()
    at = new_app(120)
    at.switch_page("pages/kernels.py")
    at.query_params.update(run=runs["vllm_fullgraph"], fhost="MI300X", fbatch="100000")
    at.run()
    assert not at.exception, at.exception[0].value
    # the error's inputs name stored things: escaped markdown, read as the reader sees it
    (error,) = [unescaped(e.value) for e in at.error if "Input errors" in e.value]
    assert "- attention: its floor" in error and "batch 100000" in error
    breakdown = next(d.value for d in at.dataframe if "input_error" in d.value.columns)
    row = breakdown.set_index("category").loc["attention"]
    assert row["input_error"].startswith("its floor") and row["measured_over_floor"] == ""
    assert row["at_most_to_win_us"] == ""
    sentence = next(m.value for m in at.markdown if "sum of floors" in m.value)
    assert "leaves out the categories with an input error" in sentence
    assert "Most to win: **attention**" not in sentence
