"""RankResults -> the trace_* tables (pyarrow), the --json summary, run info."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from collectors.trace import taxonomy
from collectors.trace.analyze import KINDS, RankResult, meta_value
from collectors.trace.arrow import _bools, _col, _dict_array, _from_rows, _strings
from collectors.trace.npx import unique_sorted
from store.trace_vocab import COMM_SOURCES

CATS = np.array(taxonomy.CATEGORIES, dtype=object)
SOURCES = np.array(COMM_SOURCES, dtype=object)


@dataclass
class Built:
    tables: dict[str, Any]
    summary: dict[str, Any]
    run_info: dict[str, Any]


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


def build(results: list[RankResult], ranks: list[tuple[int, str]]) -> Built:
    import pyarrow as pa

    rank_rows, step_rows, cat_rows, stat_parts, kernel_parts = [], [], [], [], []
    outside_parts, source_parts = [], []
    for res, (rank, source) in zip(results, ranks, strict=True):
        raw, t = res.raw, res.times
        dist = raw.meta.get("distributedInfo") if isinstance(raw.meta, dict) else None
        dist = dist if isinstance(dist, dict) else {}
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
            })  # fmt: skip
        cat_rows.append(_step_categories(res, rank))
        outside_parts.append(_outside_categories(res, rank))
        source_parts.append(_comm_sources(res, rank))
        stat_parts.append(_kernel_stats(res, rank))
        kernel_parts.append(_kernels(res, rank))
    tables = {
        "trace_ranks": _from_rows(rank_rows, _RANK_SCHEMA()),
        "trace_steps": _from_rows(step_rows, _STEP_SCHEMA()),
        "trace_step_categories": pa.concat_tables(cat_rows),
        "trace_outside_categories": pa.concat_tables(outside_parts),
        "trace_comm_sources": pa.concat_tables(source_parts),
        "trace_kernel_stats": pa.concat_tables(stat_parts),
        "trace_kernels": pa.concat_tables(kernel_parts, promote_options="permissive"),
    }
    return Built(tables, _summary(results, ranks, tables), _run_info(results, ranks))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _step_categories(res: RankResult, rank: int):
    import pyarrow as pa

    sel = res.step >= 0
    key = res.step[sel] * len(CATS) + res.category[sel]
    uniq, inverse, calls = np.unique(key, return_inverse=True, return_counts=True)
    total = np.bincount(inverse, weights=res.dur[sel], minlength=len(uniq))
    return pa.table({
        "rank": _col(np.full(len(uniq), rank), pa.int32()),
        "step": _col(uniq // len(CATS), pa.int32()),
        "category": _strings(CATS[uniq % len(CATS)].tolist()),
        "calls": _col(calls, pa.int64()),
        "total_us": _col(total, pa.float64()),
    })  # fmt: skip


def _outside_categories(res: RankResult, rank: int):
    """GPU events launched outside every step, per category (the page's "outside steps")."""
    import pyarrow as pa

    sel = res.step < 0
    uniq, inverse, calls = np.unique(res.category[sel], return_inverse=True, return_counts=True)
    total = np.bincount(inverse.reshape(-1), weights=res.dur[sel], minlength=len(uniq))
    return pa.table({
        "rank": _col(np.full(len(uniq), rank), pa.int32()),
        "category": _strings(CATS[uniq].tolist()),
        "calls": _col(calls, pa.int64()),
        "total_us": _col(total, pa.float64()),
    })  # fmt: skip


def _comm_sources(res: RankResult, rank: int):
    """Collectives per (inside steps?, category, source), totalled over the rank."""
    import pyarrow as pa

    sel = res.source >= 0
    n_src = len(SOURCES)
    key = ((res.step[sel] >= 0) * len(CATS) + res.category[sel]) * n_src + res.source[sel]
    uniq, inverse, calls = np.unique(key, return_inverse=True, return_counts=True)
    total = np.bincount(inverse.reshape(-1), weights=res.dur[sel], minlength=len(uniq))
    in_steps, rest = np.divmod(uniq, len(CATS) * n_src)
    cat, src = np.divmod(rest, n_src)
    return pa.table({
        "rank": _col(np.full(len(uniq), rank), pa.int32()),
        "category": _strings(CATS[cat].tolist()),
        "source": _strings(SOURCES[src].tolist()),
        "in_steps": _bools(in_steps.astype(bool)),
        "calls": _col(calls, pa.int64()),
        "total_us": _col(total, pa.float64()),
    })  # fmt: skip


def _kernel_stats(res: RankResult, rank: int):
    import pyarrow as pa

    n_cat, n_dtype = len(CATS), max(len(res.dtype), 1)
    key = (res.name * n_cat + res.category) * n_dtype + res.dtype_of
    uniq, inverse, calls = np.unique(key, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    name_of, rest = np.divmod(uniq, n_cat * n_dtype)
    cat_of, dtype_of = np.divmod(rest, n_dtype)
    m = len(uniq)
    total = np.bincount(inverse, weights=res.dur, minlength=m)
    lo = np.full(m, np.inf)
    hi = np.full(m, -np.inf)
    np.minimum.at(lo, inverse, res.dur)
    np.maximum.at(hi, inverse, res.dur)
    sel = res.step >= 0
    pairs = unique_sorted(inverse[sel].astype(np.int64) * (int(res.step.max(initial=0)) + 1)
                      + res.step[sel])  # fmt: skip
    steps_seen = np.bincount(pairs // (int(res.step.max(initial=0)) + 1), minlength=m)
    names = res.raw.names
    return pa.table({
        "rank": _col(np.full(m, rank), pa.int32()),
        "name": _strings([names[int(i)] for i in name_of]),
        "category": _strings(CATS[cat_of].tolist()),
        "dtype": _strings([res.dtype[int(i)] for i in dtype_of]),
        "calls": _col(calls, pa.int64()),
        "total_us": _col(total, pa.float64()),
        "min_us": _col(lo, pa.float64()),
        "max_us": _col(hi, pa.float64()),
        "steps_seen": _col(steps_seen, pa.int32()),
    })  # fmt: skip


def _kernels(res: RankResult, rank: int):
    import pyarrow as pa

    n = len(res.name)
    used, name_codes = np.unique(res.name, return_inverse=True) if n else (res.name, res.name)
    names = res.raw.names
    return pa.table({
        "rank": _col(np.full(n, rank), pa.int32()),
        "step": _col(res.step, pa.int32(), res.step < 0),
        "stream": _col(res.stream, pa.int64()),
        "start_us": _col(res.start - res.trace_start_us, pa.float64()),
        "dur_us": _col(res.dur, pa.float64()),
        "name": _dict_array(np.asarray(name_codes).reshape(-1), [names[int(i)] for i in used]),
        "category": _dict_array(res.category, list(taxonomy.CATEGORIES)),
        "dtype": _dict_array(res.dtype_of, [d for d in res.dtype]),
        "kind": _dict_array(res.kind, list(KINDS)),
    })  # fmt: skip


def _summary(results, ranks, tables) -> dict[str, Any]:
    cats = tables["trace_step_categories"]
    by_cat = {c: {"calls": 0, "total_us": 0.0} for c in taxonomy.CATEGORIES}
    for c, calls, total in zip(cats["category"].to_pylist(), cats["calls"].to_pylist(),
                               cats["total_us"].to_pylist(), strict=True):  # fmt: skip
        by_cat[c]["calls"] += calls
        by_cat[c]["total_us"] += total
    outside = {c: {"calls": 0, "total_us": 0.0} for c in taxonomy.CATEGORIES}
    out_t = tables["trace_outside_categories"]
    for c, calls, total in zip(out_t["category"].to_pylist(), out_t["calls"].to_pylist(),
                               out_t["total_us"].to_pylist(), strict=True):  # fmt: skip
        for bucket in (by_cat, outside):  # categories count every event once, steps or not
            bucket[c]["calls"] += calls
            bucket[c]["total_us"] += total
    sources: dict[str, dict[str, dict[str, float]]] = {}
    src_t = tables["trace_comm_sources"]
    for c, src, calls, total in zip(src_t["category"].to_pylist(), src_t["source"].to_pylist(),
                                    src_t["calls"].to_pylist(), src_t["total_us"].to_pylist(),
                                    strict=True):  # fmt: skip
        slot = sources.setdefault(c, {}).setdefault(src, {"calls": 0, "total_us": 0.0})
        slot["calls"] += calls
        slot["total_us"] += total
    for v in [*by_cat.values(), *outside.values(),
              *(x for per in sources.values() for x in per.values())]:  # fmt: skip
        v["total_us"] = round(v["total_us"], 3)
    per_rank = {
        rank: {
            "busy_us": round(r.times.busy_us, 3), "idle_us": round(r.times.idle_us, 3),
            "span_us": round(r.times.span_us, 3),
            "exposed_comm_us": round(r.times.exposed_comm_us, 3),
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


def _run_info(results: list[RankResult], ranks) -> dict[str, Any]:
    metas = [r.raw.meta for r in results]
    devices = sorted({d for m in metas if (d := _device_name(m))})
    return {
        "world_size": next((v for m in metas if (v := _int(meta_value(m, "distributedInfo",
                                                                        "world_size")))), None),
        "backend": next((v for m in metas if (v := meta_value(m, "distributedInfo", "backend"))),
                        None),
        "nccl_version": next((v for m in metas
                              if (v := meta_value(m, "distributedInfo", "nccl_version"))), None),
        "devices": devices,
        "has_gpu": any(r.has_gpu for r in results),
        "ranks": [rank for rank, _ in ranks],
        "files": [str(r.raw.path) for r in results],
    }  # fmt: skip


def _RANK_SCHEMA():  # noqa: N802 - schema factories keep pyarrow out of module import
    import pyarrow as pa

    return pa.schema([
        ("rank", pa.int32()), ("file", pa.string()), ("size_bytes", pa.int64()),
        ("partial", pa.bool_()), ("rank_source", pa.string()), ("world_size", pa.int32()),
        ("backend", pa.string()), ("nccl_version", pa.string()), ("device_name", pa.string()),
        ("events_total", pa.int64()), ("events_kept", pa.int64()), ("kernels", pa.int64()),
        ("has_gpu", pa.bool_()), ("busy_us", pa.float64()), ("idle_us", pa.float64()),
        ("span_us", pa.float64()), ("comm_us", pa.float64()),
        ("exposed_comm_us", pa.float64()), ("steps", pa.int32()),
        ("trace_start_ns", pa.int64()), ("step_source", pa.string()),
        ("graph_launches", pa.int64()), ("graph_kernels", pa.int64()),
        ("graph_moe_relabelled", pa.int64()), ("outside_calls", pa.int64()),
        ("outside_us", pa.float64()),
    ])  # fmt: skip


def _STEP_SCHEMA():  # noqa: N802
    import pyarrow as pa

    return pa.schema([
        ("rank", pa.int32()), ("step", pa.int32()), ("name", pa.string()),
        ("source", pa.string()), ("start_us", pa.float64()), ("wall_us", pa.float64()),
        ("busy_us", pa.float64()), ("context_tokens", pa.int32()),
        ("generation_tokens", pa.int32()), ("context_requests", pa.int32()),
        ("generation_requests", pa.int32()),
    ])  # fmt: skip
