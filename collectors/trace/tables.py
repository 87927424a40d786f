"""RankResults -> the trace_* tables (collectors/trace/table.py), --json summary, run info."""

from __future__ import annotations

from typing import Any

import numpy as np

from collectors.trace import taxonomy
from collectors.trace.analyze import KINDS, RankResult
from collectors.trace.npx import distinct_per_group, groups
from collectors.trace.table import Column, Table
from store.trace_vocab import COMM_SOURCES

CATS = np.array(taxonomy.CATEGORIES, dtype=object)
SOURCES = np.array(COMM_SOURCES, dtype=object)


def _device_name(meta: dict[str, Any]) -> str | None:
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        for d in props:
            if isinstance(d, dict) and d.get("name"):
                return str(d["name"])
    return None


def _us_to_ns(us: float) -> int:
    """Exact integer ns: ``us * 1000`` in floating point is off by ~100 ns at epoch scale."""
    whole = int(us // 1)
    return whole * 1000 + round((us - whole) * 1000)


def _base_ns(meta: dict[str, Any]) -> int:
    try:
        return int(meta.get("baseTimeNanoseconds") or 0)
    except (TypeError, ValueError):
        return 0


def build(results: list[RankResult], ranks: list[tuple[int, str]]
          ) -> tuple[dict[str, Table], dict[str, Any], dict[str, Any]]:  # fmt: skip
    """(the trace_* tables, the --json summary, the run info) of one run's ranks."""
    rank_rows, step_rows, cat_rows, stat_parts, kernel_parts = [], [], [], [], []
    outside_parts, source_parts = [], []
    for res, (rank, source) in zip(results, ranks, strict=True):
        raw, t, dist = res.raw, res.times, res.raw.dist
        rank_rows.append({
            "rank": rank, "file": str(raw.path), "size_bytes": raw.size_bytes,
            "partial": raw.partial, "rank_source": source,
            "world_size": _int(dist.get("world_size")), "backend": _str(dist.get("backend")),
            "nccl_version": _str(dist.get("nccl_version")), "device_name": _device_name(raw.meta),
            "events_total": raw.events_total, "events_kept": raw.events_kept,
            "kernels": len(raw.g_ts), "has_gpu": res.has_gpu,
            "busy_us": t.busy_us, "idle_us": t.idle_us, "span_us": t.span_us,
            "comm_us": t.comm_us, "exposed_comm_us": t.exposed_comm_us,
            "steps": len(res.steps),
            "trace_start_ns": _us_to_ns(res.trace_start_us) + _base_ns(raw.meta),
            "step_source": res.steps[0].source if res.steps else None,
            "graph_launches": res.graph_launches, "graph_kernels": int(res.graph.sum()),
            "graph_moe_relabelled": res.relabelled_moe,
            "outside_calls": int((res.step < 0).sum()),
            "outside_us": float(res.dur[res.step < 0].sum()),
        })  # fmt: skip
        t0 = res.trace_start_us
        for i, s in enumerate(res.steps):
            a, b = res.step_windows[i]
            step_rows.append({
                "rank": rank, "step": i, "name": s.name, "source": s.source,
                "start_us": float(a - t0), "wall_us": float(b - a),
                "busy_us": float(res.step_busy[i]),
                "context_tokens": s.context_tokens, "generation_tokens": s.generation_tokens,
                "context_requests": s.context_requests,
                "generation_requests": s.generation_requests,
                "context_kv_tokens": s.context_kv_tokens,
                "generation_kv_tokens": s.generation_kv_tokens,
                "context_attended": s.context_attended,
            })  # fmt: skip
        cat_rows.append(_categories(res, rank, in_steps=True))
        outside_parts.append(_categories(res, rank, in_steps=False))
        source_parts.append(_comm_sources(res, rank))
        stat_parts.append(_kernel_stats(res, rank))
        kernel_parts.append(_kernels(res, rank))
    tables = {
        "trace_ranks": Table.from_rows(rank_rows, _RANK_SCHEMA),
        "trace_steps": Table.from_rows(step_rows, _STEP_SCHEMA),
        "trace_step_categories": Table(cat_rows),
        "trace_outside_categories": Table(outside_parts),
        "trace_comm_sources": Table(source_parts),
        "trace_kernel_stats": Table(stat_parts),
        "trace_kernels": Table(kernel_parts),
    }
    return tables, _summary(results, ranks, tables), _run_info(results, ranks)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _categories(res: RankResult, rank: int, in_steps: bool):
    """Calls and time per (step, category) of the events inside steps, or per category of
    the GPU events launched outside every step (the page's "outside steps")."""
    sel = res.step >= 0 if in_steps else res.step < 0
    key = (res.step[sel] if in_steps else 0) * np.int64(len(CATS)) + res.category[sel]
    uniq, inverse, calls = groups(key)
    del key
    total = np.bincount(inverse, weights=res.dur[sel], minlength=len(uniq))
    step = {"step": Column("int32", uniq // len(CATS))} if in_steps else {}
    return {
        "rank": Column("int32", np.full(len(uniq), rank)),
        **step,
        "category": Column("string", CATS[uniq % len(CATS)].tolist()),
        "calls": Column("int64", calls),
        "total_us": Column("double", total),
    }  # fmt: skip


def _comm_sources(res: RankResult, rank: int):
    """Collectives per (inside steps?, category, source), totalled over the rank."""
    sel = res.source >= 0
    n_src = len(SOURCES)
    key = ((res.step[sel] >= 0) * len(CATS) + res.category[sel]) * n_src + res.source[sel]
    uniq, inverse, calls = groups(key)
    total = np.bincount(inverse, weights=res.dur[sel], minlength=len(uniq))
    in_steps, rest = np.divmod(uniq, len(CATS) * n_src)
    cat, src = np.divmod(rest, n_src)
    return {
        "rank": Column("int32", np.full(len(uniq), rank)),
        "category": Column("string", CATS[cat].tolist()),
        "source": Column("string", SOURCES[src].tolist()),
        "in_steps": Column("bool", in_steps.astype(bool)),
        "calls": Column("int64", calls),
        "total_us": Column("double", total),
    }  # fmt: skip


def _kernel_stats(res: RankResult, rank: int):
    n_cat, n_dtype = len(CATS), max(len(res.dtype), 1)
    key = (res.name.astype(np.int64) * n_cat + res.category) * n_dtype + res.dtype_of
    uniq, inverse, calls = groups(key)
    del key
    name_of, rest = np.divmod(uniq, n_cat * n_dtype)
    cat_of, dtype_of = np.divmod(rest, n_dtype)
    m = len(uniq)
    total = np.bincount(inverse, weights=res.dur, minlength=m)
    lo = np.full(m, np.inf)
    hi = np.full(m, -np.inf)
    np.minimum.at(lo, inverse, res.dur)
    np.maximum.at(hi, inverse, res.dur)
    sel = res.step >= 0
    steps_seen = distinct_per_group(inverse[sel], res.step[sel], m)
    names = res.raw.names
    return {
        "rank": Column("int32", np.full(m, rank)),
        "name": Column("string", [names[int(i)] for i in name_of]),
        "category": Column("string", CATS[cat_of].tolist()),
        "dtype": Column("string", [res.dtype[int(i)] for i in dtype_of]),
        "calls": Column("int64", calls),
        "total_us": Column("double", total),
        "min_us": Column("double", lo),
        "max_us": Column("double", hi),
        "steps_seen": Column("int32", steps_seen),
        "short_name": Column("string", [res.raw.short_names.get(names[int(i)]) for i in name_of]),
    }  # fmt: skip


def _kernels(res: RankResult, rank: int):
    n = len(res.name)
    used, name_codes, _calls = groups(res.name)
    names = res.raw.names
    return {
        "rank": Column("int32", np.full(n, rank, dtype=np.int32)),
        "step": Column("int32", res.step, res.step < 0),
        "stream": Column("int64", res.stream),
        "start_us": Column("double", res.start - res.trace_start_us),
        "dur_us": Column("double", res.dur),
        "name": Column("string", name_codes,
                       dictionary=[names[int(i)] for i in used]),
        "category": Column("string", res.category, dictionary=list(taxonomy.CATEGORIES)),
        "dtype": Column("string", res.dtype_of, dictionary=[d for d in res.dtype]),
        "kind": Column("string", res.kind, dictionary=list(KINDS)),
    }  # fmt: skip


def _summary(results, ranks, tables) -> dict[str, Any]:
    def rows(name: str, *columns: str) -> Any:
        return zip(*(tables[name].column(c) for c in columns), strict=True)

    def add(slot: dict[str, float], calls: int, total: float) -> None:
        slot["calls"] += calls
        slot["total_us"] += total

    by_cat = {c: {"calls": 0, "total_us": 0.0} for c in taxonomy.CATEGORIES}
    outside = {c: {"calls": 0, "total_us": 0.0} for c in taxonomy.CATEGORIES}
    sources: dict[str, dict[str, dict[str, float]]] = {}
    for c, calls, total in rows("trace_step_categories", "category", "calls", "total_us"):
        add(by_cat[c], calls, total)
    for c, calls, total in rows("trace_outside_categories", "category", "calls", "total_us"):
        add(by_cat[c], calls, total)  # categories count every event once, steps or not
        add(outside[c], calls, total)
    for c, src, calls, total in rows("trace_comm_sources", "category", "source", "calls",
                                     "total_us"):  # fmt: skip
        add(sources.setdefault(c, {}).setdefault(src, {"calls": 0, "total_us": 0.0}), calls, total)
    for v in [*by_cat.values(), *outside.values(),
              *(x for per in sources.values() for x in per.values())]:  # fmt: skip
        v["total_us"] = round(v["total_us"], 3)
    per_rank = {
        rank: {
            "busy_us": round(r.times.busy_us, 3), "idle_us": round(r.times.idle_us, 3),
            "span_us": round(r.times.span_us, 3),
            "exposed_comm_us": round(r.times.exposed_comm_us, 3),
            "mean_step_wall_us": _mean_wall(r),
        }
        for r, (rank, _src) in zip(results, ranks, strict=True)
    }  # fmt: skip
    return {
        "ranks": [rank for rank, _ in ranks],
        "steps": max((len(r.steps) for r in results), default=0),
        "partial": any(r.raw.partial for r in results),
        "categories": by_cat,
        "outside_steps": {c: v for c, v in outside.items() if v["calls"]},
        "comm_sources": sources,
        "gpu_events": sum(len(r.raw.g_ts) for r in results),
        "graph_mode": any(r.graph_launches > 0 and r.graph.any() for r in results),
        "step_source": next((r.steps[0].source for r in results if r.steps), None),
        "per_rank": per_rank,
    }


def _mean_wall(res: RankResult) -> float | None:
    """Mean wall of the rank's steps (their GPU windows, collectors/trace/windows.py)."""
    w = res.step_windows
    return round(float(np.mean(w[:, 1] - w[:, 0])), 3) if len(w) else None


def _run_info(results: list[RankResult], ranks) -> dict[str, Any]:
    devices = sorted({d for r in results if (d := _device_name(r.raw.meta))})

    def first(key: str, cast: Any = lambda v: v) -> Any:  # the first rank's that says
        return next((v for r in results if (v := cast(r.raw.dist.get(key)))), None)

    return {
        "world_size": first("world_size", _int), "backend": first("backend"),
        "nccl_version": first("nccl_version"), "devices": devices,
        "has_gpu": any(r.has_gpu for r in results),
        "ranks": [rank for rank, _ in ranks],
        "files": [str(r.raw.path) for r in results],
    }  # fmt: skip


_RANK_SCHEMA = [
    ("rank", "int32"), ("file", "string"), ("size_bytes", "int64"), ("partial", "bool"),
    ("rank_source", "string"), ("world_size", "int32"), ("backend", "string"),
    ("nccl_version", "string"), ("device_name", "string"), ("events_total", "int64"),
    ("events_kept", "int64"), ("kernels", "int64"), ("has_gpu", "bool"), ("busy_us", "double"),
    ("idle_us", "double"), ("span_us", "double"), ("comm_us", "double"),
    ("exposed_comm_us", "double"), ("steps", "int32"), ("trace_start_ns", "int64"),
    ("step_source", "string"), ("graph_launches", "int64"), ("graph_kernels", "int64"),
    ("graph_moe_relabelled", "int64"), ("outside_calls", "int64"), ("outside_us", "double"),
]  # fmt: skip

_STEP_SCHEMA = [
    ("rank", "int32"), ("step", "int32"), ("name", "string"), ("source", "string"),
    ("start_us", "double"), ("wall_us", "double"), ("busy_us", "double"),
    ("context_tokens", "int32"), ("generation_tokens", "int32"), ("context_requests", "int32"),
    ("generation_requests", "int32"), ("context_kv_tokens", "int64"),
    ("generation_kv_tokens", "int64"), ("context_attended", "int64"),
]  # fmt: skip
