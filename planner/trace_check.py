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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from planner.policy import (
    UNCHANGED,
    Policy,
    Precision,
    UnknownDtype,
    check_precision,
    normalize_dtype,
)
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


def _is_comm(row: Mapping) -> bool:
    return str(row.get("category") or "") in COMM_CATEGORIES or bool(
        _COLLECTIVE.search(str(row.get("name") or ""))
    )


def _dtype_of(row: Mapping) -> str | None:
    """The collective's float dtype if it is one we check; None for ints, fp32 or unknown."""
    for raw in (row.get("dtype"), *(m.group(1) for m in _NAME_DTYPE.finditer(str(row["name"])))):
        if not raw:
            continue
        try:
            dtype = normalize_dtype(str(raw))
        except UnknownDtype:
            continue
        return dtype if dtype in _CHECKED else None
    return None


def _component(row: Mapping) -> str:
    cat, name = str(row.get("category") or ""), str(row.get("name") or "")
    if cat in ("allgather", "all_to_all") or _DISPATCH.search(name) and "combine" not in name:
        return "dispatch"
    return "communication"


def _finding(row: Mapping, level: str, rule_id: str, check: str, dtype: str, sentence: str,
             detail: str) -> TraceFinding:  # fmt: skip
    rank = row.get("rank")
    return TraceFinding(
        level, rule_id, check, str(row.get("run_id") or ""),
        None if rank is None else int(rank), str(row["name"]),
        str(row.get("category") or ""), dtype, int(row.get("calls") or 0),
        float(row.get("total_us") or 0.0), sentence, detail,
    )  # fmt: skip


def _violations(row, component, dtype, native, policy, check, why) -> list[TraceFinding]:
    nat = native or ASSUMED_NATIVE
    changes = {component: dtype}
    if component == "communication":
        changes["dispatch"] = nat.get("dispatch")
    out = []
    for v in check_precision(nat, UNCHANGED.with_(**changes), policy):
        # FP16 against an assumed BF16 model is only a cast if the model really is BF16.
        level = "review" if native is None and dtype == "fp16" else "violation"
        assumed = "" if native else " (checkpoint assumed BF16; choose its native precision)"
        out.append(_finding(row, level, v.rule_id, check, dtype, v.sentence,
                            f"{why}; {v.detail}{assumed}"))  # fmt: skip
    return out


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
    rows = [_clean(r) for r in rows if r.get("name")]
    adjacency = {rid: [_clean(r) for r in rs] for rid, rs in (adjacency or {}).items()}
    out: list[TraceFinding] = []
    comm_calls: dict[tuple, set[int]] = defaultdict(set)
    for row in rows:
        if not _is_comm(row):
            continue
        key = (row.get("run_id"), row.get("rank"))
        if str(row.get("category") or "") in COMM_CATEGORIES:
            comm_calls[key].add(int(row.get("calls") or 0))
        name = str(row["name"])
        codec = _QR_CODEC.search(name)
        if codec:
            dtype = {"Q4": "int4", "Q6": "int6", "Q8": "int8", "FP": "fp16"}[codec.group(1)]
            out += _violations(row, "communication", dtype, native, policy,
                               "quantizing_collective", f"quick-reduce codec {codec.group(1)}")  # fmt: skip
            continue
        dtype = _dtype_of(row)
        if _LOW_COMBINE.search(name):
            out += _violations(row, "communication", dtype or "fp8_e4m3", native, policy,
                               "quantizing_collective", "low-precision MoE combine")  # fmt: skip
        elif (
            dtype
            and _QUANT.search(name)
            and not _DEQUANT.search(name)
            and re.search(r"allreduce|all_reduce|fusion", name, re.I)
        ):
            rule = policy.rules_for("communication")
            if rule:
                out.append(_finding(row, "review", rule[0].id, "quantizing_collective", dtype,
                                    "Needs review: " + rule[0].sentence,
                                    "fused AllReduce + quantize: lossless only if the "
                                    "quantization feeds an FP8 GEMM of an FP8 checkpoint"))  # fmt: skip
        elif dtype:
            out += _violations(row, _component(row), dtype, native, policy,
                               "low_precision_collective", f"collective kernel in {dtype}")  # fmt: skip
    for run_rows in adjacency.values():
        out += check_adjacent(run_rows, policy)
    for row in rows:
        key = (row.get("run_id"), row.get("rank"))
        if (
            row.get("run_id") not in adjacency
            and _is_quantize(row)
            and not _is_comm(row)
            and int(row.get("calls") or 0) in comm_calls.get(key, set())
        ):
            calls = int(row.get("calls") or 0)
            out += _review(row, "paired_quantize", f"{calls} quantize calls, as many as a "
                           "collective on this rank: check whether it quantizes the payload "
                           "before sending", policy)  # fmt: skip
    return out


def _clean(row: Mapping) -> dict:
    """Missing values from a DataFrame arrive as NaN (truthy): make them None."""
    return {k: None if isinstance(v, float) and v != v else v for k, v in row.items()}


def _is_quantize(row: Mapping) -> bool:
    name = str(row.get("name") or "")
    return (str(row.get("category") or "") == "cast_quant" and bool(_QUANT.search(name))
            and not _DEQUANT.search(name))  # fmt: skip


def _review(row: Mapping, check: str, detail: str, policy: Policy) -> list[TraceFinding]:
    rule = policy.rules_for("communication")
    if not rule:
        return []
    return [_finding(row, "review", rule[0].id, check, str(row.get("dtype") or ""),
                     "Needs review: " + rule[0].sentence, detail)]  # fmt: skip


def check_adjacent(rows: Iterable[Mapping], policy: Policy) -> list[TraceFinding]:
    """Rule 3 from the per-event table: rows of (run_id, rank, name, category,
    comm_category, times, comm_calls) = kernel ``name`` started right before ``times`` of
    the rank's ``comm_calls`` collectives of ``comm_category``. A quantize kernel in front
    of at least half of a collective's calls is a review item."""
    out: list[TraceFinding] = []
    for row in rows:
        times, total = int(row.get("times") or 0), int(row.get("comm_calls") or 0)
        if _is_quantize(row) and times and 2 * times >= total:
            found = _review({**row, "calls": times, "total_us": 0.0}, "quantize_before_collective",
                            f"launched right before {times} of {total} {row.get('comm_category')} "
                            "calls on this rank: check whether it quantizes the payload",
                            policy)  # fmt: skip
            out += found
    return out


def quantize_candidates(rows: Iterable[Mapping]) -> set[str]:
    """Runs where rule 3 could fire: a quantize kernel on a rank that runs a collective. For
    the other runs the call-count proxy and the per-event check agree (nothing to find)."""
    rows = [_clean(r) for r in rows if r.get("name")]
    comm = {(r.get("run_id"), r.get("rank")) for r in rows
            if str(r.get("category") or "") in COMM_CATEGORIES}  # fmt: skip
    return {str(r.get("run_id")) for r in rows
            if _is_quantize(r) and (r.get("run_id"), r.get("rank")) in comm}  # fmt: skip


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
