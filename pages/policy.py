"""Policy: which stored trace runs break the active precision policy, a run's findings, a
verdict for a pasted launch command / systemd unit / env file (parsed as text, never
executed), and the policy's rules.

First screen: "N of M runs comply; K break it (top rules), L need review" and a filterable
table of the runs (run, host, rules, kernel evidence) with a CSV of every run
(pages/helpers/policy_runs.py). URL state: ``show`` and ``rule`` (the table's filters),
``native`` (the checkpoint kind the checks compare against, e.g. ``deepseek-v3``) and
``run`` (an absolute run id; absent = none opened). Only that run's per-event rows are read
(exact quantize-before-collective check); the other runs use call counts.
Pasted text is deliberately NOT put in the URL: unit files often carry secrets (tokens in
Environment= lines).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from pages.helpers import policy_runs as pr
from pages.helpers import text as txt
from pages.helpers import ui
from planner.api import NATIVE_HINTS as HINTS
from planner.api import PolicyError, check_runs, load_policy, run_verdict
from store.errors import StoreError, StoreMissing
from store.queries import policy as qp

ASSUMED = "assumed"
NO_RUN = "(none)"
MAX_PASTE = 64 * 1024
TRACE_AREA = ui.Area("trace", "Trace", "python -m collectors trace PATH")
NATIVE_LABELS = {
    ASSUMED: "not given: BF16 model dtype, no KV quantization (assumed)",
    "int4": "INT4 weight-only, W4A16 (e.g. Kimi-K2.5)",
    "fp8-block": "FP8 128x128 blocks (e.g. DeepSeek-V3, MiniMax-M2.5)",
    "bf16": "BF16", "fp16": "FP16",
    "kimi-k2.5": "Kimi-K2.5 (INT4 W4A16)", "kimi-k2": "Kimi-K2 (INT4 W4A16)",
    "deepseek-v3": "DeepSeek-V3 (FP8 blocks)", "minimax-m2.5": "MiniMax-M2.5 (FP8 blocks)",
    "w4a16": "W4A16",
}  # fmt: skip


def md(text: object) -> str:
    """Inline code for names that carry markdown characters (kernel templates, flags)."""
    return "`" + str(text).replace("`", "'") + "`"


def show_findings(findings: list) -> None:
    """A pasted file's findings: one line each (a launch command has a few), a table when
    there are more."""
    if len(findings) > ui.FEW:
        st.dataframe(pd.DataFrame([f.__dict__ for f in findings]), hide_index=True,
                     width="stretch")  # fmt: skip
        return
    for f in findings:
        where = f" {md(f.where)}" if f.where else ""
        st.markdown(f"- **{f.level}** {md(f.rule_id) if f.rule_id else ''} line {f.line}:"
                    f"{where} {txt.md(f.sentence)} ({txt.md(f.detail)})")  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def checked(loc, version: str, host: str | None, native_key: str, selected: str):
    """Every trace run checked against the policy: (runs, the runs table, findings, rule-3
    candidates, the run checked exactly or None), kept per store version, host, checkpoint
    and opened run: the rows of 3,600 runs take a second to check, and every click reruns
    the page. Only ``selected``'s per-event rows are read (the exact rule-3 check); the
    other runs use the call-count proxy, since a window over all of ``trace_kernels`` (100M
    rows at scale) is tens of seconds."""
    policy = load_policy()
    native = None if native_key == ASSUMED else HINTS[native_key]
    runs = qp.trace_runs(loc, host)
    rows = qp.policy_kernel_rows(loc, host)
    with_events = set(qp.event_runs(loc, host))
    exact = selected if selected in with_events and selected in set(runs["run_id"]) else None
    adjacency = {exact: qp.quantize_before_collectives(loc, host, run_id=exact).to_dict(
        "records")} if exact else {}  # fmt: skip
    # column by column: DataFrame.to_dict over arrow-backed strings cost 6x (40,000 rows)
    columns = {c: rows[c].tolist() for c in rows.columns}
    findings, candidates = check_runs(columns, policy, native, adjacency)
    table = pr.run_table(runs, findings, lambda mine, rid: run_verdict(
        mine, rid, rid == exact, rid in with_events, rid in candidates))  # fmt: skip
    return runs, table, findings, candidates, exact


def share_link_and_stop() -> None:
    with link_slot:
        ui.share_link()
    st.stop()


def url_select(label: str, options: list[str], param: str, fmt) -> str:
    """A selectbox whose URL parameter holds the option's key (an absolute run id, a
    checkpoint kind), not its display label; the first option is the default (no param)."""
    key = f"pick_{param}"
    wanted = st.query_params.get(param)
    if wanted and wanted not in options:
        st.warning(f"{label}: '{txt.name(wanted)}' from the link is not available here.")
    if st.session_state.get(key) not in options:
        st.session_state[key] = wanted if wanted in options else options[0]
    choice = st.selectbox(label, options, key=key, format_func=fmt)
    if choice == options[0]:
        st.query_params.pop(param, None)
    else:
        st.query_params[param] = choice
    return choice


st.title("Policy")
link_slot = st.container()  # the share link, drawn once every picker has set the URL
try:
    policy = load_policy()
except PolicyError as exc:
    st.error(str(exc))
    st.stop()
answer = st.container()  # the answer and the runs table; filled once the runs are checked

st.subheader("Open a run")
c1, c2 = st.columns(2)
with c2:
    native_key = url_select(
        "Checkpoint's native precision (what the checks compare against)", [ASSUMED, *HINTS],
        "native", lambda k: NATIVE_LABELS.get(k, k),
    )  # fmt: skip
native = None if native_key == ASSUMED else HINTS[native_key]
loc = ui.store()
host = ui.host_filter()
# The run chosen in the URL (or the Run box, rendered further down): the only run whose
# per-event rows are read (checked()).
selected = st.session_state.get("pick_run") or st.query_params.get("run") or NO_RUN
try:
    runs, table, findings, candidates, exact = checked(loc, ui.version(loc), host, native_key,
                                                       selected)  # fmt: skip
except StoreMissing:
    with answer:
        ui.empty_state(TRACE_AREA, "No store yet. Import PyTorch-profiler traces to check them:")
    share_link_and_stop()
except StoreError as exc:
    with answer:
        ui.store_problem(exc)
    share_link_and_stop()
except Exception as exc:  # noqa: BLE001 - a store from before the trace tables: say so
    with answer:
        st.error(txt.md(f"Cannot read the trace tables of this store: {exc}".splitlines()[0]))
    share_link_and_stop()
if runs.empty:
    with answer:
        ui.empty_state(TRACE_AREA, "No trace runs" + (f" from {txt.name(host)}" if host else "") +
                       " yet. Import PyTorch-profiler traces to check them:")  # fmt: skip
    share_link_and_stop()
broken = pr.broken_rules(table, findings)

with answer:
    st.markdown(pr.answer(table, broken, policy.label))
    st.caption(f"Checkpoint precision: {NATIVE_LABELS.get(native_key, native_key)}. Rule 3 (a "
               "quantize kernel launched right before a collective) comes from the per-event "
               "rows only for the opened run" + (f" ({exact})" if exact else "") + "; for the "
               "others it is the call-count proxy (a quantize kernel with as many calls as a "
               f"collective on that rank): {len(candidates - {exact}):,} other run(s) have a "
               "quantize kernel on a rank with collectives.")  # fmt: skip
    f1, f2, _ = st.columns([2, 2, 3])
    counts = pr.counts(table)
    default_show = pr.SHOW[0] if counts[pr.BREAKS] + counts[pr.REVIEW] else "all"
    show = f1.selectbox("Show", pr.SHOW, key="show", bind="query-params",
                        index=pr.SHOW.index(default_show))  # fmt: skip
    rule = f2.selectbox("Rule", [pr.ANY_RULE, *(r.id for r in policy.rules)], key="rule",
                        bind="query-params")  # fmt: skip
    view = pr.shown(table, show, rule)
    st.container(key="policy_runs").dataframe(view, hide_index=True, width="stretch", height=360)
    t1, t2 = st.columns([5, 1])
    t1.caption(f"{len(view):,} of {len(table):,} run(s) shown; the CSV holds every run.")
    with t2:
        ui.csv_download(table, "policy-runs", label="CSV (every run)")

columns = (table[c].tolist() for c in ("run_id", "host", "name", "verdict"))  # not to_dict: 6x
labels = {run: f"{run} · {txt.short(host)} · {txt.short(name)} · {verdict}"
          for run, host, name, verdict in zip(*columns, strict=True)}  # fmt: skip
with c1:
    run = url_select("Run", [NO_RUN, *labels], "run", lambda r: labels.get(r, r))
if run != NO_RUN:
    mine = [f for f in findings if f.run_id == run]
    if not mine:
        st.success(f"Run {run}: no FP8 collective or quantizing communication kernel found; "
                   f"compliant with {policy.label}.")  # fmt: skip
    else:
        frame = pd.DataFrame([f.__dict__ for f in mine])
        st.caption(f"Run {run}: {len(mine)} finding(s), one per rank and kernel.")
        st.dataframe(frame[["level", "rule_id", "rank", "kernel", "category", "dtype", "calls",
                            "total_us", "sentence", "detail"]], hide_index=True, width="stretch")  # fmt: skip
        ui.csv_download(frame, "policy-trace-findings")
if findings:  # the frame is built on click: ~7,600 findings at 10,000 runs
    ui.csv_download(lambda: pd.DataFrame([f.__dict__ for f in findings]), "policy-all-findings",
                    label="CSV (every finding of every run)")  # fmt: skip

st.subheader("Check a launch command or unit file")
st.caption("Paste a `vllm serve` / `sglang.launch_server` command, a shell script, a systemd "
           "unit or an env file. It is parsed as text: nothing is executed, no file it names "
           f"is opened. Up to {MAX_PASTE // 1024} KiB.")  # fmt: skip
with st.form("lint"):
    text = st.text_area("Launch command, unit or env file", height=200, max_chars=MAX_PASTE,
                        key="paste")  # fmt: skip
    st.form_submit_button("Check", icon=":material/rule:")
if text and text.strip():
    from planner.api import lint_text  # the linter's parsers load only when text is pasted

    result = lint_text(text[:MAX_PASTE], policy, native, name="pasted")
    shown = (
        st.error if not result.compliant else st.warning if result.count("review") else st.success
    )
    shown(f"Verdict: {result.verdict} (native precision: {result.native_source})")
    show_findings(result.findings)

st.subheader("The policy's rules")
st.markdown(f"**{policy.name}** version **{policy.version}**: {policy.description}")
rules = pd.DataFrame(
    [(r.id, r.kind, r.component, r.sentence, r.rationale) for r in policy.rules],
    columns=["id", "kind", "component", "rule", "rationale"],
)
st.table(rules.set_index("id"))
st.caption(f"Rules file: `{Path(policy.path).name}` (planner/policy/policies/). Lint a file with "
           "`python -m planner lint FILE [--policy P] [--native KIND | --model-config "
           "config.json]`.")  # fmt: skip
ui.csv_download(rules, f"policy-{policy.name}-{policy.version}")

with link_slot:
    ui.share_link()
