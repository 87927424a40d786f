"""The Policy page's logic through Streamlit's AppTest on a store with hundreds of runs: the
answer is counts (never a list of run ids), the table holds the runs the filters keep and
its data every run, a run opened from the link shows its findings as a table. Where things
sit on the screen is tests/e2e/test_policy.py's business.

The store: two trace runs (an FP8 and a BF16 AllReduce, tests/policy/fp8_trace.py) imported
by the trace collector's own code and committed by the store's commit path, then copied to
hundreds of runs on nine hosts in one transaction (a commit per run costs ~0.1 s of CPU)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from collectors.trace.ingest import ingest_traces
from pages.helpers import policy_runs as pr
from store.commit import commit_entry
from store.location import resolve
from store.spool.bundle import Bundle, RunRecord, write_spool
from tests.helpers import ROOT
from tests.policy.fp8_trace import write_trace

RUNS, EVERY_BF16 = 300, 5  # every fifth run is the compliant BF16 one
FP8 = RUNS - RUNS // EVERY_BF16
HOSTS = 9


def _copy_runs(store: Path, sources: dict[str, str]) -> None:
    """Copy each source run's rows in every table to the runs named in ``sources``
    (new id -> source id), each on a host of its own, in one transaction."""
    con = duckdb.connect(str(store))
    try:
        con.execute("CREATE TEMP TABLE ids (new_id VARCHAR, src VARCHAR, n INTEGER)")
        con.executemany("INSERT INTO ids VALUES (?, ?, ?)",
                        [(new, src, i) for i, (new, src) in enumerate(sources.items())])  # fmt: skip
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_columns() WHERE column_name = 'run_id' "
            "AND schema_name = 'main' AND NOT internal AND table_name IN "
            "(SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main')").fetchall()]  # fmt: skip
        con.execute("BEGIN TRANSACTION")
        for table in tables:
            extra = (f", 'gpu-node-' || (ids.n % {HOSTS}) AS host, "
                     "finished_at + to_minutes(ids.n) AS finished_at" if table == "runs" else "")  # fmt: skip
            con.execute(f'INSERT INTO "{table}" SELECT t.* REPLACE (ids.new_id AS run_id{extra}) '
                        f'FROM "{table}" t JOIN ids ON t.run_id = ids.src')  # fmt: skip
        con.execute(f"DELETE FROM runs WHERE run_id IN ({', '.join('?' * 2)})",
                    list(set(sources.values())))  # fmt: skip
        for table in tables:
            if table != "runs":
                con.execute(f'DELETE FROM "{table}" WHERE run_id NOT IN (SELECT run_id FROM runs)')
        con.execute("COMMIT")
    finally:
        con.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("policy-fleet")
    store = tmp / "stepscope.duckdb"
    loc = resolve(str(store))
    src = {}
    for dtype in ("f8e4m3", "bf16"):
        tables = ingest_traces([write_trace(tmp / f"{dtype}.pt.trace.json.gz", dtype=dtype)]).tables
        run = RunRecord(f"trace-src-{dtype}", "trace", "gpu-node-0", "2026-11-01T00:00:00+00:00",
                        "2026-11-01T00:05:00+00:00", label=f"{dtype}-allreduce")  # fmt: skip
        src[dtype] = commit_entry(loc, write_spool(Bundle(run, tables), loc.spool_dir)).run_id
    _copy_runs(store, {f"trace-{i:04d}": src["bf16" if i % EVERY_BF16 == 0 else "f8e4m3"]
                       for i in range(RUNS)})  # fmt: skip
    return store


def open_page(monkeypatch: pytest.MonkeyPatch, store: Path, **params: str):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("STEPSCOPE_STORE", str(store))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/policy.py")
    at.query_params.update(params)
    at.run()
    assert not at.exception, at.exception[0].value
    return at


def runs_table(at):
    (frame,) = [d.value for d in at.dataframe if "verdict" in d.value.columns]
    return frame


def test_hundreds_of_runs_give_counts_and_a_table(monkeypatch, fleet) -> None:
    at = open_page(monkeypatch, fleet)
    answer = at.markdown[0].value
    assert answer == (f"**{RUNS - FP8}** of **{RUNS}** trace runs comply with full-precision "
                      f"v1.0.0; **{FP8}** break it (`communication-native` in {FP8} runs), "
                      "**0** need review.")  # fmt: skip
    assert max(len(str(t.value)) for t in [*at.markdown, *at.caption]) < 1_500
    shown = runs_table(at)  # the default view: the runs that break it or need review
    assert len(shown) == FP8 and set(shown["verdict"]) == {pr.BREAKS}
    assert shown["rules"].eq("communication-native").all()
    assert shown["evidence"].str.contains("ncclDevKernel_AllReduce_Sum_f8e4m3").all()
    assert shown["host"].nunique() == HOSTS
    assert f"{FP8:,} of {RUNS:,} run(s) shown; the CSV holds every run." in [
        c.value for c in at.caption]  # fmt: skip
    # The table's filters are in the URL; every run, compliant ones included, is in reach.
    at.selectbox(key="show").set_value("all").run()
    every = runs_table(at)
    assert len(every) == RUNS and (every["verdict"] == "compliant").sum() == RUNS - FP8
    assert every["run_id"].is_unique


def test_a_linked_run_opens_its_findings_as_a_table(monkeypatch, fleet) -> None:
    at = open_page(monkeypatch, fleet, run="trace-0001", show="compliant")
    assert set(runs_table(at)["verdict"]) == {"compliant"}
    findings = [d.value for d in at.dataframe if "rule_id" in d.value.columns]
    (frame,) = findings
    assert set(frame["rule_id"]) == {"communication-native"}
    # The FP8 AllReduce breaks the rule; the exact rule-3 check on the opened run's per-event
    # rows finds the quantize kernel launched before each AllReduce, for review.
    levels = dict(zip(frame["level"], frame["kernel"], strict=True))
    assert levels["violation"].startswith("ncclDevKernel_AllReduce_Sum_f8e4m3")
    assert levels["review"] == "void vllm::per_token_quant_fp8_kernel<__nv_bfloat16>"
    assert any("comes from the per-event rows only for the opened run (trace-0001)" in c.value
               for c in at.caption)  # fmt: skip


def test_run_table_counts_rules_and_filters() -> None:
    """pages/helpers/policy_runs.py on hand-made findings: worst first, rules counted per run."""
    import pandas as pd

    from planner.policy.trace_check import TraceFinding

    def finding(run: str, level: str, rule: str, calls: int) -> TraceFinding:
        return TraceFinding(level, rule, "c", run, 0, f"k-{rule}", "allreduce", "fp8", calls,
                            1.0, "s", "d")  # fmt: skip

    runs = pd.DataFrame({"run_id": ["a", "b", "c", "d"], "host": ["h1", "h1", "h2", "h3"],
                         "label": ["x", None, "", "y"], "verb": ["trace"] * 4})  # fmt: skip
    found = [finding("b", "violation", "r1", 4), finding("b", "review", "r3", 9),
             finding("c", "violation", "r2", 1), finding("c", "violation", "r1", 2),
             finding("d", "review", "r3", 1)]  # fmt: skip

    def verdict(mine, _rid):
        levels = {f.level for f in mine}
        return pr.BREAKS if "violation" in levels else pr.REVIEW if levels else "compliant"

    table = pr.run_table(runs, found, verdict)
    assert table["run_id"].tolist() == ["b", "c", "d", "a"]
    assert table.set_index("run_id").loc["b", "evidence"] == "violation r1: k-r1 x4 on rank 0 (+1 more)"
    assert table.set_index("run_id").loc["c", "name"] == "trace"
    rules = pr.broken_rules(table, found)
    assert rules == [("r1", 2), ("r2", 1)]
    assert pr.answer(table, rules, "P v1") == ("**1** of **4** trace runs comply with P v1; **2** "
                                               "break it (`r1` in 2 runs, `r2` in 1 run), **1** "
                                               "need review.")  # fmt: skip
    assert pr.shown(table, "review", pr.ANY_RULE)["run_id"].tolist() == ["d"]
    assert pr.shown(table, "all", "r2")["run_id"].tolist() == ["c"]
    assert pr.shown(table, "compliant", pr.ANY_RULE)["run_id"].tolist() == ["a"]
    assert pr.shown(table, "broken or review", "r1")["run_id"].tolist() == ["b", "c"]
