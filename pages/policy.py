"""Policy: the active precision policy, stored trace runs that break it, and a verdict for a
pasted launch command / systemd unit / env file (parsed as text, never executed).

URL state: ``native`` (the checkpoint kind the checks compare against, e.g. ``deepseek-v3``)
and ``run`` (an absolute run id; absent = every run). Only that run's per-event rows are
read (exact quantize-before-collective check); the all-runs summary uses call counts.
Pasted text is deliberately NOT put in the URL: unit files often carry secrets (tokens in
Environment= lines).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd
import streamlit as st

from pages.helpers import text as txt
from pages.helpers import ui
from planner.api import NATIVE_HINTS as HINTS
from planner.api import (
    PolicyError,
    check_kernels,
    lint_text,
    load_policy,
    quantize_candidates,
    run_verdict,
)
from store.errors import StoreError, StoreMissing
from store.queries import policy as qp

ASSUMED = "assumed"
ALL_RUNS = "(all runs)"
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


def show_findings(findings: list, kind: str) -> None:
    for f in findings:
        if kind == "lint":
            where = f" {md(f.where)}" if f.where else ""
            st.markdown(f"- **{f.level}** {md(f.rule_id) if f.rule_id else ''} line {f.line}:"
                        f"{where} {txt.md(f.sentence)} ({txt.md(f.detail)})")  # fmt: skip
        else:
            rank = "" if f.rank is None else f" rank {f.rank}"
            st.markdown(f"- **{f.level}** {md(f.rule_id)} run {md(f.run_id)}{rank}: "
                        f"{md(txt.short(f.kernel, 160))} x{f.calls} - {txt.md(f.sentence)} "
                        f"({txt.md(f.detail)})")  # fmt: skip


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
ui.share_link()
try:
    policy = load_policy()
except PolicyError as exc:
    st.error(str(exc))
    st.stop()

st.subheader("Active policy")
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

native_key = url_select(
    "Checkpoint's native precision (what the checks compare against)", [ASSUMED, *HINTS],
    "native", lambda k: NATIVE_LABELS.get(k, k),
)  # fmt: skip
native = None if native_key == ASSUMED else HINTS[native_key]

st.subheader("Check a launch command or unit file")
st.caption("Paste a `vllm serve` / `sglang.launch_server` command, a shell script, a systemd "
           "unit or an env file. It is parsed as text: nothing is executed, no file it names "
           f"is opened. Up to {MAX_PASTE // 1024} KiB.")  # fmt: skip
with st.form("lint"):
    text = st.text_area("Launch command, unit or env file", height=200, max_chars=MAX_PASTE,
                        key="paste")  # fmt: skip
    st.form_submit_button("Check", icon=":material/rule:")
if text and text.strip():
    result = lint_text(text[:MAX_PASTE], policy, native, name="pasted")
    shown = (
        st.error if not result.compliant else st.warning if result.count("review") else st.success
    )
    shown(f"Verdict: {result.verdict} (native precision: {result.native_source})")
    show_findings(result.findings, "lint")

st.subheader("Stored trace runs")
loc = ui.store()
host = ui.host_filter()
# The run chosen in the URL (or the Run box, rendered further down): the only run whose
# per-event rows are read. The all-runs summary never scans trace_kernels (100M rows at
# scale: a window over all of it is tens of seconds); it uses the call-count proxy.
selected = st.session_state.get("pick_run") or st.query_params.get("run") or ALL_RUNS
try:
    runs = qp.trace_runs(loc, host)
    rows = qp.policy_kernel_rows(loc, host)
    with_events = set(qp.event_runs(loc, host))
    exact = selected if selected in with_events and selected in set(runs["run_id"]) else None
    adjacent = qp.quantize_before_collectives(loc, host, run_id=exact) if exact else None
except StoreMissing:
    ui.empty_state(TRACE_AREA, "No store yet. Import PyTorch-profiler traces to check them:")
    st.stop()
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()
except Exception as exc:  # noqa: BLE001 - a store from before the trace tables: say so
    st.error(txt.md(f"Cannot read the trace tables of this store: {exc}".splitlines()[0]))
    st.stop()
if runs.empty:
    ui.empty_state(TRACE_AREA, "No trace runs" + (f" from {txt.name(host)}" if host else "") +
                   " yet. Import PyTorch-profiler traces to check them:")  # fmt: skip
    st.stop()

adjacency = {exact: adjacent.to_dict("records")} if exact else {}
records = rows.to_dict("records")
findings = check_kernels(records, policy, native, adjacency)
candidates = quantize_candidates(records)
flagged = sorted({f.run_id for f in findings if f.level == "violation"})
review = sorted({f.run_id for f in findings if f.level == "review"} - set(flagged))
st.markdown(
    f"Checked **{len(runs)}** trace run(s): **{len(flagged)}** break the policy"
    + (f" ({', '.join(flagged)})" if flagged else "")
    + f", **{len(review)}** need review"
    + (f" ({', '.join(review)})" if review else "")
    + f". Checkpoint precision: {NATIVE_LABELS.get(native_key, native_key)}."
)
# Findings grouped by run once: counting them per run over all findings was runs x findings
# (3,000 runs: ~1 s of a warm render).
by_run: dict[str, list] = defaultdict(list)
for f in findings:
    by_run[f.run_id].append(f)
runs = runs.assign(
    name=[lab if isinstance(lab, str) and lab else verb for lab, verb in zip(
        runs["label"], runs["verb"], strict=True)],
    violations=[sum(f.level == "violation" for f in by_run[rid]) for rid in runs["run_id"]],
    reviews=[sum(f.level == "review" for f in by_run[rid]) for rid in runs["run_id"]],
)  # fmt: skip
runs["verdict"] = [
    run_verdict(by_run[rid], rid, rid == exact, rid in with_events, rid in candidates)
    for rid in runs["run_id"]
]
# st.table renders Markdown in its cells: the names are escaped (and shortened) for it
shown_runs = runs.assign(host=runs["host"].map(txt.name), name=runs["name"].map(txt.name))
st.table(shown_runs[["run_id", "host", "name", "verdict", "violations", "reviews"]]
         .set_index("run_id"))  # fmt: skip
st.caption("Rule 3 (a quantize kernel launched right before a collective) is checked from the "
           "per-event rows only for the selected run"
           + (f" ({exact})" if exact else "") + "; for the other runs it is the call-count "
           "proxy (a quantize kernel with as many calls as a collective on that rank), "
           f"which can miss or over-flag: {len(candidates - {exact})} other run(s) have a "
           "quantize kernel on a rank with collectives; open a run for its exact check.")  # fmt: skip
labels = {
    r["run_id"]: f"{r['run_id']} · {txt.short(r['host'])} · {txt.short(r['name'])}"
    for r in runs.to_dict("records")
}
run = url_select("Run", [ALL_RUNS, *labels], "run", lambda r: labels.get(r, r))
shown_findings = [f for f in findings if run == ALL_RUNS or f.run_id == run]
if run != ALL_RUNS and not shown_findings:
    st.success(f"Run {run}: no FP8 collective or quantizing communication kernel found; "
               f"compliant with {policy.label}.")  # fmt: skip
show_findings(shown_findings, "trace")
if shown_findings:
    table = pd.DataFrame([f.__dict__ for f in shown_findings])
    ui.csv_download(table, "policy-trace-findings")
