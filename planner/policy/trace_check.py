"""Policy checks on stored trace runs (pure: rows in, findings out).

Input rows are per-kernel statistics (``trace_kernel_stats``: run_id, rank, name, category,
dtype, calls, total_us). Three rules, all reported through :func:`check_precision`:

1. **Low-precision collective** (violation): a communication kernel whose dtype (the column,
   or the kernel name, e.g. ``ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL``) is below the
   checkpoint's precision: FP8 / FP4 collectives, or FP16 for a BF16 model. AllGather /
   all-to-all / SendRecv carry MoE dispatch payloads (FP8 is native there for FP8
   block-quantized checkpoints); AllReduce / ReduceScatter carry sums and combine payloads.
   Integer and FP32 collectives (metadata broadcasts, token ids) are never flagged.
2. **Quantizing collective** (violation or review): one kernel that both quantizes and
   communicates, named so (quick-reduce codecs ``CodecQ4/Q6/Q8``, ``*fp8*dispatch*``,
   ``*low_precision*combine*``). A fused AllReduce + quantize (e.g. FlashInfer's allreduce
   fusion with an FP8 quant pattern) is a review item: it is lossless for the payload when
   the quantization feeds an FP8 GEMM of an FP8 checkpoint.
3. **Quantize kernel in front of a collective** (review): where the run's per-event table
   (``trace_kernels``) is stored, a ``cast_quant`` kernel whose name says it quantizes
   (``quant``, not ``dequant``) and that is the kernel started right before at least half
   of a collective category's calls on a rank (quantize-then-send). Without per-event
   rows, the proxy is a quantize kernel whose call count equals a collective's call count
   on that rank. Either way a human confirms it in the timeline, so it is a review item:
   an FP8 checkpoint quantizes activations for its GEMMs, not for the wire.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from planner.policy.check import Policy, Rule, check_precision
from planner.specs.precision import UNCHANGED, Precision, UnknownDtype, normalize_dtype
from store import trace_vocab

COMM_CATEGORIES = trace_vocab.COMM  # the trace importer's communication categories
ASSUMED_NATIVE = Precision("", "bf16", "bf16", "bf16", "bf16")
_DISPATCH = re.compile(r"allgather|all_gather|all_to_all|alltoall|all2all|sendrecv|dispatch", re.I)
_COLLECTIVE = re.compile(
    r"nccl|rccl|allreduce|all_reduce|reducescatter|reduce_scatter|allgather|all_gather|"
    r"alltoall|all_to_all|all2all|sendrecv|cross_device_reduce|quickreduce|quick_reduce|"
    r"deep_?ep|moe_a2a|dispatch|combine|multimem", re.I)  # fmt: skip
_NAME_DTYPE = re.compile(r"(?<![a-z0-9])(f8e4m3|f8e5m2|e4m3|e5m2|fp8|fp16|half|nvfp4|fp4)"
                         r"(?![a-z0-9])", re.I)  # fmt: skip
_QR_CODEC = re.compile(r"Codec(Q4|Q6|Q8|FP)\b")
_QUANT = re.compile(r"quant", re.I)
_DEQUANT = re.compile(r"dequant", re.I)
_LOW_COMBINE = re.compile(r"low_?precision.*(combine|a2a)|(combine|a2a).*low_?precision", re.I)
_CHECKED = {"fp8_e4m3", "fp8_e5m2", "fp16", "nvfp4", "mxfp4"}


@dataclass(frozen=True)
class TraceFinding:
    level: str  # "violation" | "review"
    rule_id: str
    check: str  # "low_precision_collective" | "quantizing_collective" | "paired_quantize"
    run_id: str
    rank: int | None
    kernel: str
    category: str
    dtype: str
    calls: int
    total_us: float
    sentence: str
    detail: str


@dataclass(frozen=True)
class _Verdict:
    """What a rule says of a kernel (name, category, dtype), whichever run or rank ran it:
    rules 1 and 2 read nothing else, so they are decided once per distinct kernel."""

    level: str
    rule_id: str
    check: str
    dtype: str
    sentence: str
    detail: str


def _get(row: Mapping, key: str) -> Any:
    """``row[key]``, None when absent or NaN (a DataFrame's missing value, and truthy)."""
    value = row.get(key)
    return None if isinstance(value, float) and value != value else value


def _text(row: Mapping, key: str) -> str:
    return str(_get(row, key) or "")


@lru_cache(maxsize=4096)
def _is_comm_kernel(name: str, category: str) -> bool:
    return category in COMM_CATEGORIES or bool(_COLLECTIVE.search(name))


def _dtype_of(name: str, dtype: str | None) -> str | None:
    """The collective's float dtype if it is one we check; None for ints, fp32 or unknown."""
    for raw in (dtype, *(m.group(1) for m in _NAME_DTYPE.finditer(name))):
        if not raw:
            continue
        try:
            found = normalize_dtype(str(raw))
        except UnknownDtype:
            continue
        return found if found in _CHECKED else None
    return None


def _component(name: str, category: str) -> str:
    if category in ("allgather", "all_to_all") or _DISPATCH.search(name) and "combine" not in name:
        return "dispatch"
    return "communication"


class _Row(NamedTuple):
    """One kernel-statistics row's fields, read once (a fleet checks ~40,000 rows)."""

    run_id: str
    rank: int | None
    name: str
    category: str
    dtype: Any
    calls: int
    total_us: float


def _row(row: Mapping) -> _Row:
    rank = _get(row, "rank")
    return _Row(_text(row, "run_id"), None if rank is None else int(rank), _text(row, "name"),
                _text(row, "category"), _get(row, "dtype"), int(_get(row, "calls") or 0),
                float(_get(row, "total_us") or 0.0))  # fmt: skip


def _rows(rows: Iterable[Mapping]) -> list[_Row]:
    """``_row`` of every row that names a kernel."""
    rows = list(rows)
    return _column_rows({key: [row.get(key) for row in rows] for key in _Row._fields})


def _column_rows(columns: Mapping[str, Sequence]) -> list[_Row]:
    """``_row`` of every row of ``columns`` (name -> values) that names a kernel, inlined: a
    fleet's ~40,000 rows took 0.18 s through ``_row``'s per-field calls and 0.10 s more to
    build a dict per row; ~0.07 s here (``x != x``: a DataFrame's NaN)."""
    absent = [None] * len(columns["name"]) if "name" in columns else []
    out = []
    for run_id, rank, name, category, dtype, calls, total_us in zip(
        *(columns.get(key, absent) for key in _Row._fields), strict=True
    ):
        if not name or name != name:
            continue
        out.append(_Row("" if not run_id or run_id != run_id else str(run_id),
                        None if rank is None or rank != rank else int(rank), str(name),
                        "" if not category or category != category else str(category),
                        None if dtype != dtype else dtype,
                        int(calls) if calls and calls == calls else 0,
                        float(total_us) if total_us and total_us == total_us else 0.0))  # fmt: skip
    return out


def _finding(r: _Row, v: _Verdict) -> TraceFinding:
    return TraceFinding(v.level, v.rule_id, v.check, r.run_id, r.rank, r.name, r.category,
                        v.dtype, r.calls, r.total_us, v.sentence, v.detail)  # fmt: skip


def _violations(component, dtype, native, policy, check, why) -> list[_Verdict]:
    nat = native or ASSUMED_NATIVE
    changes = {component: dtype}
    if component == "communication":
        changes["dispatch"] = nat.get("dispatch")
    out = []
    for v in check_precision(nat, UNCHANGED.with_(**changes), policy):
        # FP16 against an assumed BF16 model is only a cast if the model really is BF16.
        level = "review" if native is None and dtype == "fp16" else "violation"
        assumed = "" if native else " (checkpoint assumed BF16; choose its native precision)"
        out.append(_Verdict(level, v.rule_id, check, dtype, v.sentence,
                            f"{why}; {v.detail}{assumed}"))  # fmt: skip
    return out


def _comm_verdicts(name: str, category: str, dtype_column: str | None, policy: Policy,
                   native: Precision | None) -> list[_Verdict]:  # fmt: skip
    """Rules 1 and 2 for one communication kernel."""
    codec = _QR_CODEC.search(name)
    if codec:
        dtype = {"Q4": "int4", "Q6": "int6", "Q8": "int8", "FP": "fp16"}[codec.group(1)]
        return _violations("communication", dtype, native, policy, "quantizing_collective",
                           f"quick-reduce codec {codec.group(1)}")  # fmt: skip
    dtype = _dtype_of(name, dtype_column)
    if _LOW_COMBINE.search(name):
        return _violations("communication", dtype or "fp8_e4m3", native, policy,
                           "quantizing_collective", "low-precision MoE combine")  # fmt: skip
    if (
        dtype
        and _QUANT.search(name)
        and not _DEQUANT.search(name)
        and re.search(r"allreduce|all_reduce|fusion", name, re.I)
    ):
        rule = policy.rules_for("communication")
        if not rule:
            return []
        return [_Verdict("review", rule[0].id, "quantizing_collective", dtype,
                         "Needs review: " + rule[0].sentence,
                         "fused AllReduce + quantize: lossless only if the quantization feeds "
                         "an FP8 GEMM of an FP8 checkpoint")]  # fmt: skip
    if dtype:
        return _violations(_component(name, category), dtype, native, policy,
                           "low_precision_collective", f"collective kernel in {dtype}")  # fmt: skip
    return []


def check_kernels(
    rows: Iterable[Mapping],
    policy: Policy,
    native: Precision | None = None,
    adjacency: Mapping[str, list[Mapping]] | None = None,
) -> list[TraceFinding]:
    """Apply the three trace rules to kernel-statistics rows of one or more runs.

    ``adjacency`` maps a run id to its "kernel launched right before a collective" rows
    (see :func:`check_adjacent`) for runs whose per-event table is stored; rule 3 then uses
    that instead of the call-count proxy.
    """
    return _check(_rows(rows), policy, native, adjacency or {})


def check_runs(
    columns: Mapping[str, Sequence],
    policy: Policy,
    native: Precision | None = None,
    adjacency: Mapping[str, list[Mapping]] | None = None,
) -> tuple[list[TraceFinding], set[str]]:
    """:func:`check_kernels` and :func:`quantize_candidates` of the same rows, given as
    columns (name -> values, e.g. each column of a DataFrame as a list) and read once: a
    fleet's Policy page checks ~40,000 rows of 3,600 runs."""
    kernel_rows = _column_rows(columns)
    return _check(kernel_rows, policy, native, adjacency or {}), _candidates(kernel_rows)


def _check(rows: list[_Row], policy: Policy, native: Precision | None,
           adjacency: Mapping[str, list[Mapping]]) -> list[TraceFinding]:  # fmt: skip
    out: list[TraceFinding] = []
    comm_calls: dict[tuple, set[int]] = defaultdict(set)
    # What rules 1-2 say and whether rule 3 may pair it, per distinct kernel (name,
    # category, dtype): a fleet has ~40,000 rows and a few hundred kernels.
    kinds: dict[tuple, tuple[bool, bool, list[_Verdict]]] = {}
    quantize: list[_Row] = []
    for r in rows:
        kernel = (r.name, r.category, r.dtype)
        kind = kinds.get(kernel)
        if kind is None:
            comm = _is_comm_kernel(r.name, r.category)
            verdicts = _comm_verdicts(*kernel, policy, native) if comm else []
            kind = kinds[kernel] = (comm, _is_quantize_kernel(r.name, r.category), verdicts)
        comm, quantizes, verdicts = kind
        if comm:
            if r.category in COMM_CATEGORIES:
                comm_calls[(r.run_id, r.rank)].add(r.calls)
            if verdicts:
                out += [_finding(r, v) for v in verdicts]
        elif quantizes and r.run_id not in adjacency:
            quantize.append(r)
    for run_rows in adjacency.values():
        out += check_adjacent(run_rows, policy)
    rule = policy.rules_for("communication")
    for r in quantize:
        if r.calls in comm_calls.get((r.run_id, r.rank), ()):
            out += _review(r, "paired_quantize", f"{r.calls} quantize calls, as many as a "
                           "collective on this rank: check whether it quantizes the payload "
                           "before sending", rule)  # fmt: skip
    return out


@lru_cache(maxsize=4096)
def _is_quantize_kernel(name: str, category: str) -> bool:
    return category == "cast_quant" and bool(_QUANT.search(name)) and not _DEQUANT.search(name)


def _is_quantize(row: Mapping) -> bool:
    return _is_quantize_kernel(_text(row, "name"), _text(row, "category"))


def _review(r: _Row, check: str, detail: str, rule: tuple[Rule, ...]) -> list[TraceFinding]:
    """A review item under the first communication rule (``policy.rules_for("communication")``,
    looked up once by the caller: thousands of rows), none when the policy has no such rule."""
    if not rule:
        return []
    return [_finding(r, _Verdict("review", rule[0].id, check, "" if r.dtype is None else
                                 str(r.dtype), "Needs review: " + rule[0].sentence, detail))]  # fmt: skip


def check_adjacent(rows: Iterable[Mapping], policy: Policy) -> list[TraceFinding]:
    """Rule 3 from the per-event table: rows of (run_id, rank, name, category,
    comm_category, times, comm_calls) = kernel ``name`` started right before ``times`` of
    the rank's ``comm_calls`` collectives of ``comm_category``. A quantize kernel in front
    of at least half of a collective's calls is a review item."""
    out: list[TraceFinding] = []
    for row in rows:
        times, total = int(_get(row, "times") or 0), int(_get(row, "comm_calls") or 0)
        if _is_quantize(row) and times and 2 * times >= total:
            found = _review(_row({**row, "calls": times, "total_us": 0.0}), "quantize_before_collective",
                            f"launched right before {times} of {total} {_get(row, 'comm_category')} "
                            "calls on this rank: check whether it quantizes the payload",
                            policy.rules_for("communication"))  # fmt: skip
            out += found
    return out


def quantize_candidates(rows: Iterable[Mapping]) -> set[str]:
    """Runs where rule 3 could fire: a quantize kernel on a rank that runs a collective. For
    the other runs the call-count proxy and the per-event check agree (nothing to find)."""
    return _candidates(_rows(rows))


def _candidates(rows: list[_Row]) -> set[str]:
    comm = {(r.run_id, r.rank) for r in rows if r.category in COMM_CATEGORIES}
    return {r.run_id for r in rows
            if _is_quantize_kernel(r.name, r.category) and (r.run_id, r.rank) in comm}  # fmt: skip


def run_verdict(findings: Iterable[TraceFinding], run_id: str, exact: bool,
                has_events: bool, candidate: bool = False) -> str:  # fmt: skip
    """One run's verdict for a summary table, saying when rule 3 rests on call counts.

    ``exact``: rule 3 came from the run's per-event rows (``check_kernels`` got its
    adjacency); otherwise it is the call-count proxy, which can both flag and miss a
    quantize kernel in front of a collective (``candidate``: the run has one that could be,
    see :func:`quantize_candidates`). Where the run has per-event rows (``has_events``),
    opening the run gives the exact check.
    """
    mine = [f for f in findings if f.run_id == run_id]
    if any(f.level == "violation" for f in mine):
        return "breaks the policy"
    reviews = [f for f in mine if f.level == "review"]
    if exact or any(f.check != "paired_quantize" for f in reviews):
        return "needs review" if reviews else "compliant"
    if not reviews and not candidate:
        return "compliant"
    how = ("by call counts; open the run for the exact check" if has_events
           else "by call counts; no per-event rows stored")  # fmt: skip
    return f"needs review ({how})" if reviews else f"compliant ({how})"
