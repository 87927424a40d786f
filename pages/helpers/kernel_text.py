"""The Kernel page's sentences: communication, step anatomy, accounting, provenance.

Words only: numbers come from store.queries.trace through pages/kernels.py.
"""

from __future__ import annotations

import pandas as pd

from pages.helpers.text import md

SOURCE_LABEL = {"attention": "Attention", "moe": "MoE", "mlp": "Dense MLP",
                "embedding": "Embedding", "logits": "Logits", "other": "Other"}  # fmt: skip
COMM_LABEL = {"allreduce": "AllReduce", "all_to_all": "all-to-all", "allgather": "AllGather",
              "reduce_scatter": "ReduceScatter", "other_comm": "collective"}  # fmt: skip
WHY = {"moe": " - what expert parallelism would remove"}


def anatomy_sentences(rows: pd.DataFrame) -> list[str]:
    """ "MoE AllReduce: 60 calls/step, 4.68 ms (21.6% of step) - what expert parallelism
    would remove", one per (collective, issuing module)."""
    out = []
    for r in rows.to_dict("records"):
        who = f"{SOURCE_LABEL.get(r['source'], r['source'])} {COMM_LABEL.get(r['category'], r['category'])}"
        why = WHY.get(r["source"], "") if r["category"] in ("allreduce", "all_to_all") else ""
        out.append(f"**{who}**: {r['calls_per_step']:.0f} calls/step, "
                   f"{r['us_per_step'] / 1000:.2f} ms ({r['pct_of_step']:.1f}% of step){why}")  # fmt: skip
    return out


def accounting_sentence(counts: pd.DataFrame, outside: pd.DataFrame) -> str:
    """Every GPU event (top-level CPU op of a CPU-only trace) once: in a step or outside."""
    if counts.empty or pd.isna(counts.iloc[0]["accounted"]) or not counts.iloc[0]["accounted"]:
        return ""
    c = counts.iloc[0]
    total = int(c["in_steps"]) + int(c["outside"])
    if pd.notna(c["events"]):
        text = f"All {int(c['events']):,} GPU events counted once: "
    else:
        text = f"All {total:,} top-level CPU ops (CPU-only trace) counted once: "
    text += f"{int(c['in_steps']):,} in steps, {int(c['outside']):,} outside steps"
    if not outside.empty:
        parts = ", ".join(f"{md(r['category'])} {int(r['calls'])} ({r['total_us']:.0f} us)"
                          for r in outside.head(6).to_dict("records"))  # fmt: skip
        text += f" ({parts})"
    return text + "."


def provenance_notes(info: pd.Series) -> list[str]:
    """How steps and categories were found, when it limits what the numbers mean."""
    notes = []
    graph = info.get("graph_kernels")
    if pd.notna(graph) and graph > 0:
        notes.append(f"{int(graph):,} of {int(info['gpu_events']):,} GPU events ran in CUDA-graph "
                     "replays: no CPU op runs during a replay, so their categories come from "
                     "kernel names only (expert GEMMs between MoE kernels by kernel order).")  # fmt: skip
    if info.get("step_source") == "capture_range":
        notes.append("Steps by capture range: the Nsight Systems report has no step NVTX range "
                     "(vLLM's CUDA profiler writes `execute_*` ranges) nor one graph launch "
                     "per step, so each cudaProfilerStart..Stop range (or the whole capture) "
                     "is one step.")  # fmt: skip
    if info.get("step_source") == "gap":
        notes.append("Steps by gap: the trace has no step annotation (vLLM `execute_*`, "
                     "`ProfilerStep#`, SGLang `step[...]`, `execute_model` frames or one graph "
                     "launch per step), so steps are split at idle gaps.")  # fmt: skip
    return notes


def comm_sentences(summary: pd.DataFrame) -> list[str]:
    lines = []
    for row in summary[summary["is_comm"]].to_dict("records"):
        dtypes = f", {md(row['dtypes'])}" if isinstance(row["dtypes"], str) and row["dtypes"] else ""
        lines.append(
            f"**{row['category']}**: {row['calls_per_step']:.0f} calls/step, "
            f"{row['avg_us']:.1f} us avg, {row['pct_of_step']:.1f}% of step{dtypes}"
        )
    return lines
