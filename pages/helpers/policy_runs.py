"""The Policy page's answer: one row per stored trace run (verdict, the rules it breaks, the
kernel that shows it) and the counts its first sentence gives.

Pure: the runs frame (store.queries.policy.trace_runs) and the planner's findings in, a
frame and words out. A fleet has thousands of runs, so nothing here lists run ids in a
sentence: the counts go in words, the runs in the table (and its CSV, every run).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

import pandas as pd

BREAKS, REVIEW, COMPLIES = "breaks the policy", "needs review", "compliant"
TOP_RULES = 3  # rules named in the sentence; the table's rule filter has them all
# The table's filter (the URL's ``show``): a bound selectbox puts the option itself in the URL
SHOW = ("broken or review", "broken", "review", "compliant", "all")
ANY_RULE = "any"
COLUMNS = ["run_id", "host", "name", "verdict", "rules", "evidence", "violations", "reviews"]


def outcome(verdict: str) -> str:
    """BREAKS, REVIEW or COMPLIES for a verdict from planner.run_verdict (which may add how
    rule 3 was decided in brackets)."""
    return BREAKS if verdict == BREAKS else REVIEW if verdict.startswith(REVIEW) else COMPLIES


def _evidence(mine: list) -> str:
    """The kernel that shows the run's worst finding (violations first, most calls)."""
    if not mine:
        return ""
    f = max(mine, key=lambda f: (f.level == "violation", f.calls, f.total_us))
    rank = "" if f.rank is None else f" on rank {f.rank}"
    more = f" (+{len(mine) - 1} more)" if len(mine) > 1 else ""
    return f"{f.level} {f.rule_id}: {f.kernel} x{f.calls}{rank}{more}"


def run_table(runs: pd.DataFrame, findings: Iterable,
              verdict: Callable[[list, str], str]) -> pd.DataFrame:  # fmt: skip
    """Every run of ``runs`` with its verdict (``verdict(its findings, run_id)``), the rule
    ids it breaks or needs reviewed, and its evidence; worst first, then newest."""
    by_run: dict[str, list] = defaultdict(list)
    for f in findings:
        by_run[f.run_id].append(f)
    rows = []
    # column by column: DataFrame.to_dict over arrow-backed strings cost 6x (3,600 runs)
    labels = runs["label"].tolist() if "label" in runs else [None] * len(runs)
    for run_id, host, verb, label in zip(runs["run_id"].tolist(), runs["host"].tolist(),
                                         runs["verb"].tolist(), labels, strict=True):  # fmt: skip
        mine = by_run.get(run_id, [])
        rows.append((
            run_id, host, label if isinstance(label, str) and label else verb,
            verdict(mine, run_id), ", ".join(sorted({f.rule_id for f in mine})), _evidence(mine),
            sum(f.level == "violation" for f in mine), sum(f.level == "review" for f in mine),
        ))  # fmt: skip
    table = pd.DataFrame(rows, columns=COLUMNS)
    order = table["verdict"].map(outcome).map({BREAKS: 0, REVIEW: 1, COMPLIES: 2})
    return table.iloc[order.argsort(kind="stable")].reset_index(drop=True)


def counts(table: pd.DataFrame) -> dict[str, int]:
    kinds = table["verdict"].map(outcome)
    return {k: int((kinds == k).sum()) for k in (BREAKS, REVIEW, COMPLIES)}


def broken_rules(table: pd.DataFrame, findings: Iterable) -> list[tuple[str, int]]:
    """(rule id, runs that break it), most runs first."""
    breaking = set(table.loc[table["verdict"] == BREAKS, "run_id"])
    per_rule = Counter()
    for rule, run in {(f.rule_id, f.run_id) for f in findings if f.level == "violation"}:
        if run in breaking:
            per_rule[rule] += 1
    return sorted(per_rule.items(), key=lambda kv: (-kv[1], kv[0]))


def answer(table: pd.DataFrame, rules: list[tuple[str, int]], policy_label: str) -> str:
    """'N of M runs comply with P; K break it (top rules), L need review.' (markdown; rule
    ids are the policy file's own identifiers)."""
    n = counts(table)
    total = len(table)
    text = (f"**{n[COMPLIES]:,}** of **{total:,}** trace run{'s' if total != 1 else ''} "
            f"comply with {policy_label}; **{n[BREAKS]:,}** break it")  # fmt: skip
    if rules:
        top = ", ".join(f"`{rule}` in {runs:,} run{'s' if runs != 1 else ''}"
                        for rule, runs in rules[:TOP_RULES])  # fmt: skip
        more = f" and {len(rules) - TOP_RULES} more rule(s)" if len(rules) > TOP_RULES else ""
        text += f" ({top}{more})"
    return text + f", **{n[REVIEW]:,}** need review."


def shown(table: pd.DataFrame, show: str, rule: str | None) -> pd.DataFrame:
    """The rows the table's filters keep: ``show`` one of SHOW, ``rule`` a rule id or ANY_RULE."""
    kinds = table["verdict"].map(outcome)
    keep = {"broken or review": kinds != COMPLIES, "broken": kinds == BREAKS,
            "review": kinds == REVIEW, "compliant": kinds == COMPLIES}.get(show, kinds.notna())  # fmt: skip
    if rule and rule != ANY_RULE:
        keep &= table["rules"].str.split(", ").map(lambda ids: rule in ids)
    return table[keep]
