"""Trace-run policy checks end to end: real `python -m collectors trace` imports, the
store's named queries, then planner.policy.trace_check."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.policy.check import load_policy
from planner.policy.trace_check import check_kernels
from planner.specs.native import parse_hint
from store.location import resolve
from store.queries import policy as qp
from tests.helpers import FIXTURES, run_cli
from tests.policy.fp8_trace import LAYERS, import_fp8_and_bf16_runs

HTA_RANK0 = FIXTURES / "traces" / "hta" / "sampled_rank-0.json.gz"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    return import_fp8_and_bf16_runs(tmp_path_factory.mktemp("policy-traces"))


def findings(store: Path, run_id: str, native: str | None = None, events: bool = True):
    loc = resolve(str(store))
    rows = qp.policy_kernel_rows(loc, run_id=run_id)
    assert not rows.empty
    adjacency = None
    if events:
        assert run_id in qp.event_runs(loc)
        adjacent = qp.quantize_before_collectives(loc, run_id=run_id)
        adjacency = {run_id: adjacent.to_dict("records")}
    return rows, check_kernels(rows.to_dict("records"), load_policy(),
                               parse_hint(native) if native else None, adjacency)  # fmt: skip


def test_fp8_allreduce_run_is_flagged(stored) -> None:
    store, ids = stored
    rows, found = findings(store, ids["fp8-allreduce"])
    nccl = rows[rows["name"].str.startswith("ncclDevKernel_AllReduce")]
    assert nccl["category"].tolist() == ["allreduce"]
    violations = [f for f in found if f.level == "violation"]
    assert [(f.rule_id, f.check, f.calls) for f in violations] == [
        ("communication-native", "low_precision_collective", 3 * LAYERS)
    ]
    assert violations[0].kernel.startswith("ncclDevKernel_AllReduce_Sum_f8e4m3")
    # The FP8 quantize kernel launched right before every AllReduce is a review item, found
    # from the per-event table, or from matching call counts without it.
    quant = "void vllm::per_token_quant_fp8_kernel<__nv_bfloat16>"
    reviews = [(f.check, f.kernel, f.calls) for f in found if f.level == "review"]
    assert reviews == [("quantize_before_collective", quant, 3 * LAYERS)]
    _, proxy = findings(store, ids["fp8-allreduce"], events=False)
    reviews = [(f.check, f.kernel, f.calls) for f in proxy if f.level == "review"]
    assert reviews == [("paired_quantize", quant, 3 * LAYERS)]
    # FP8 AllReduce stays a violation even for an FP8 checkpoint: only dispatch is native.
    _, for_deepseek = findings(store, ids["fp8-allreduce"], "deepseek-v3")
    assert [f.rule_id for f in for_deepseek if f.level == "violation"] == ["communication-native"]


def test_bf16_allreduce_run_has_no_violation(stored) -> None:
    store, ids = stored
    _, found = findings(store, ids["bf16-allreduce"])
    assert [f for f in found if f.level == "violation"] == []


def test_store_lists_trace_runs(stored) -> None:
    store, ids = stored
    runs = qp.trace_runs(resolve(str(store)))
    assert set(runs["run_id"]) == set(ids.values())


@pytest.mark.skipif(not HTA_RANK0.exists(), reason=f"fixture {HTA_RANK0} absent")
def test_real_training_trace_collectives_pass(tmp_path: Path) -> None:
    """A real 128-rank job's rank 0: float AllReduce, byte SendRecv all-to-all: compliant."""
    store = tmp_path / "s.duckdb"
    res = run_cli(store, "trace", str(HTA_RANK0), "--json")
    assert res.code == 0, res.stderr
    rows, found = findings(store, res.json["run_id"])
    assert rows["category"].isin(["all_to_all", "allreduce", "allgather"]).any()
    assert [f for f in found if f.level == "violation"] == []


def test_page_summary_reads_per_event_rows_of_the_selected_run_only(
    stored, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The all-runs summary uses the call-count proxy (no trace_kernels scan); only the run
    in the URL gets the exact per-event check (trace_kernels filtered by its id)."""
    from store import reader
    from tests.pages.apptest import new_app

    store, ids = stored
    fp8 = ids["fp8-allreduce"]
    calls: list[tuple[str, list]] = []
    real = qp.query_df

    def recording(loc, sql, params=None):
        calls.append((sql, list(params or [])))
        return real(loc, sql, params)

    monkeypatch.setattr(qp, "query_df", recording)
    monkeypatch.setenv("STEPSCOPE_STORE", str(store))
    texts = {}
    for run in (None, fp8):
        reader.clear_cache()
        calls.clear()
        at = new_app(60)
        at.switch_page("pages/policy.py")
        at.query_params["show"] = "all"
        if run:
            at.query_params["run"] = run
        at.run()
        assert not at.exception, at.exception[0].value
        scans = [params for sql, params in calls if "trace_kernels" in sql.replace(
            "trace_kernels_", "")]  # fmt: skip
        # Unselected: no query touches trace_kernels; selected: one, bound to that run id.
        assert scans == ([] if run is None else [[None, None, fp8, fp8]])
        texts[run] = "\n".join(str(t.value) for t in [*at.caption, *at.markdown])
        (table,) = [d.value for d in at.dataframe if "verdict" in d.value.columns]
        verdicts = dict(zip(table["run_id"], table["verdict"], strict=True))
        assert verdicts == {fp8: "breaks the policy", ids["bf16-allreduce"]: "compliant"}
    # Both ways the FP8 run breaks the policy; the caption says how rule 3 was checked.
    for text in texts.values():
        assert "**1** of **2** trace runs comply" in text and "**1** break it" in text
        assert "call-count proxy" in text
    assert f"opened run ({fp8})" in texts[fp8] and "opened run (" not in texts[None]


def test_run_vs_run_diff_reads_each_run_alone(stored) -> None:
    """The Kernel page's diff of two different runs (this module's store holds both): each
    side is that run's own per-category figures, in either order, and a run against itself
    has no delta."""
    from store.queries import trace as qt

    store, ids = stored
    loc = resolve(str(store))
    a, b = ids["fp8-allreduce"], ids["bf16-allreduce"]
    own = {run: qt.category_summary(loc, run).set_index("category") for run in (a, b)}
    diff = qt.compare_categories(loc, a, b).set_index("category")
    for side, run in (("a", a), ("b", b)):
        per_step = diff[f"{side}_us_per_step"].drop("(step wall)")
        assert per_step[per_step > 0].to_dict() == pytest.approx(own[run]["us_per_step"].to_dict())
        assert diff.loc["(step wall)", f"{side}_us_per_step"] == pytest.approx(
            own[run]["step_us"].iloc[0])  # fmt: skip
    assert (diff["a_us_per_step"] != diff["b_us_per_step"]).any()
    swapped = qt.compare_categories(loc, b, a).set_index("category")
    assert swapped["a_us_per_step"].to_dict() == pytest.approx(diff["b_us_per_step"].to_dict())
    same = qt.compare_categories(loc, a, a)
    assert (same["delta_us_per_step"] == 0).all()
    assert same.set_index("category")["a_us_per_step"].to_dict() == pytest.approx(
        diff["a_us_per_step"][diff["a_us_per_step"] > 0].to_dict())  # fmt: skip
