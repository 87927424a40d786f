"""``python -m collectors floor RUN_ID``: the JSON shape, per rank, bad input; and the step
annotations that carry each step's batch and context (migration 0014)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.trace.steps import annotated_steps
from tests.helpers import query, run_cli
from tests.trace.conftest import fixture

CATEGORY_KEYS = {"measured_us_per_step", "floor_us_per_step", "assumption", "input_error"}


@pytest.fixture(scope="module")
def hta(tmp_path_factory) -> tuple[Path, str]:
    """Two real ranks of one training job (HTA's sampled traces)."""
    store = tmp_path_factory.mktemp("floor-cli") / "stepscope.duckdb"
    ranks = [str(fixture(f"hta/sampled_rank-{r}.json.gz")) for r in (0, 1)]
    res = run_cli(store, "trace", *ranks, "--json")
    assert res.code == 0, res.stderr
    return store, res.json["run_id"]


def test_json_has_the_issues_shape_and_per_rank(hta) -> None:
    store, run_id = hta
    res = run_cli(store, "floor", run_id, "--json", "--host", "h100-sxm-8x")
    assert res.code == 0, res.stderr
    got = res.json
    assert set(got) == {"categories", "step", "missing", "per_rank"}
    assert set(got["step"]) == {"measured_us", "floor_us"}
    assert got["categories"] and all(set(c) == CATEGORY_KEYS for c in got["categories"].values())
    assert set(got["per_rank"]) == {"0", "1"}
    busiest = max(got["per_rank"].values(), key=lambda r: r["step"]["measured_us"])
    assert got["categories"] == busiest["categories"]  # the top level is the busiest rank's
    # no model recorded: named, and the floors are launch floors (still floors)
    assert any(m.startswith("model:") for m in got["missing"])
    assert all(c["floor_us_per_step"] <= c["measured_us_per_step"]
               for r in got["per_rank"].values() for c in r["categories"].values())  # fmt: skip
    assert "h100-sxm-8x" not in " ".join(got["missing"])  # the host was given


@pytest.mark.parametrize(("args", "needle"), [
    (["nope"], "run nope: no trace run with this id"),
    (["{run}", "--model", "no-such.json"], "--model 'no-such.json': neither a model preset"),
    (["{run}", "--host", "h999"], "nor a GPU of the known-GPU table"),
    (["{run}", "--batch", "0"], "--batch 0: give the decode sequences per step"),
])  # fmt: skip
def test_bad_input_is_one_line(hta, args: list[str], needle: str) -> None:
    store, run_id = hta
    res = run_cli(store, "floor", *[a.format(run=run_id) for a in args])
    assert res.code == 1
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_trace_checks_its_model_before_parsing(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    res = run_cli(store, "trace", str(fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")),
                  "--model", "no-such-model")  # fmt: skip
    assert res.code == 1 and "--model 'no-such-model'" in res.stderr
    assert not store.exists()  # nothing half-written


def test_a_preset_model_given_at_import_is_recorded(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    trace = fixture("tracelens/sglang_qwen3_8b_decode.json.gz")
    run_id = run_cli(store, "trace", str(trace), "--model", "minimax-m2.5", "--batch", "8",
                     "--json").json["run_id"]  # fmt: skip
    got = run_cli(store, "floor", run_id).stdout
    assert "model: minimax-m2.5" in got and "batch: 8 [recorded with the run: its --batch]" in got


def test_vllm_detailed_annotation_gives_batch_context_and_prompt_attention(tmp_path) -> None:
    name = ("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_"
            "generation_37(sq37sk34489sqsq37sqsk34489)")  # the real piecewise trace's step
    (s,) = annotated_steps([(name, 0.0, 10.0, 1)])
    assert (s.generation_requests, s.generation_tokens, s.generation_kv_tokens) == (37, 37, 34489)
    assert (s.context_requests, s.context_tokens, s.context_kv_tokens) == (9, 8155, 8430)
    assert s.context_attended == 7671310 - (7475785 - 8155) // 2
    (old,) = annotated_steps([("execute_context_1(7)_generation_3(3)", 0.0, 1.0, 1)])
    assert old.generation_kv_tokens is None and old.context_attended is None


def test_sglang_decode_step_gives_its_batch() -> None:
    found = annotated_steps([("step[DECODE bs=32]", 0.0, 5.0, 1),
                             ("step[EXTEND bs=4]", 6.0, 5.0, 1)])  # fmt: skip
    assert [(s.source, s.generation_requests, s.generation_tokens) for s in found] == [
        ("sglang", 32, 32), ("sglang", None, None)]
    assert all(s.generation_kv_tokens is None for s in found)  # no context: named as missing


def test_the_store_keeps_the_step_context(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    trace = fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")
    assert run_cli(store, "trace", str(trace)).code == 0
    assert query(store, "SELECT generation_requests, generation_kv_tokens, context_attended "
                 "FROM v_trace_steps") == [(32, 55086, 0)]  # fmt: skip


def test_a_cpu_only_profile_run_gets_no_floors(tmp_path: Path) -> None:
    """The built-in profile over gloo: its steps are CPU ops, never floored as GPU kernels;
    its recorded shape and --batch / --context are still read."""
    store = tmp_path / "stepscope.duckdb"
    prof = run_cli(store, "profile", "--json", "--layers", "2", "--steps", "2", "--batch", "4",
                   "--context", "64")  # fmt: skip
    assert prof.code == 0, prof.stderr
    got = run_cli(store, "floor", prof.json["run_id"], "--json").json
    assert got["categories"] and all(c["floor_us_per_step"] is None
                                     for c in got["categories"].values())  # fmt: skip
    assert got["step"]["floor_us"] is None
    assert got["missing"] == ["host: a CPU-only trace (no GPU events): floors are of GPU steps"]
