"""One rank's analysis: categories, steps, busy/idle/exposed communication, aggregates.

Input is a ``RawTrace`` (typed columns); output is a ``RankResult`` whose arrays become
the trace_* tables. GPU traces are analysed on kernels + memcpy/memset; a trace without
GPU activity on its top-level CPU ops (kind ``cpu_op``).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from collectors.trace import anatomy, metrics, taxonomy, windows
from collectors.trace import steps as steps_mod
from collectors.trace.columns import RawTrace, intern
from collectors.trace.npx import unique_sorted
from store import trace_vocab

KINDS = ("kernel", "memcpy", "memset", "cpu_op")
CAT_INDEX = {c: i for i, c in enumerate(taxonomy.CATEGORIES)}
_COMM_IDX = np.array([CAT_INDEX[c] for c in taxonomy.COMM])
_CAST_OPS = frozenset(trace_vocab.CAST_OPS)


@dataclass
class RankResult:
    raw: RawTrace
    has_gpu: bool
    trace_start_us: float
    steps: list[steps_mod.Step]
    step_windows: np.ndarray  # (n, 2) GPU (or CPU-op) window per step (windows.py)
    step_busy: np.ndarray
    # per event (kernels/memcpy/memset, or top-level cpu ops)
    kind: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    stream: np.ndarray
    name: np.ndarray  # ids into raw.names
    category: np.ndarray  # ids into taxonomy.CATEGORIES
    dtype: list[str | None]  # per distinct (name, arg dtype), see dtype_of
    dtype_of: np.ndarray  # index into dtype per event
    step: np.ndarray  # -1 outside steps
    source: np.ndarray  # collectives: index into trace_vocab.COMM_SOURCES; else -1
    graph: np.ndarray  # bool: launched by a CUDA/HIP graph launch
    graph_launches: int = 0
    relabelled_moe: int = 0  # graph GEMMs between MoE kernels counted as MoE
    steps_without_gpu: int = 0  # detected steps that owned no GPU event (left out)
    times: metrics.RankTimes = field(default=None)  # type: ignore[assignment]


def _launch_times(raw: RawTrace, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CPU time of the runtime call that launched each GPU event (NaN if unknown), and
    whether that call was a graph launch (all kernels of a graph replay share its id)."""
    r_corr = np.frombuffer(raw.r_corr, dtype=np.int64)
    r_ts = np.frombuffer(raw.r_ts, dtype=np.float64)
    r_graph = np.frombuffer(raw.r_graph, dtype=np.int8)
    out = np.full(len(corr), np.nan)
    graph = np.zeros(len(corr), dtype=bool)
    if not len(r_corr) or not len(corr):
        return out, graph
    order = np.argsort(r_corr, kind="stable")
    sc, st, sg = r_corr[order], r_ts[order], r_graph[order]
    k = np.clip(np.searchsorted(sc, corr), 0, len(sc) - 1)
    hit = (sc[k] == corr) & (corr >= 0)
    out[hit] = st[k[hit]]
    graph[hit] = sg[k[hit]] > 0
    return out, graph


def _cpu_intervals(raw: RawTrace, wanted: dict[int, int],
                   extra: Sequence[tuple[float, float, int]] = ()) -> tuple[np.ndarray, ...]:  # fmt: skip
    """CPU ops whose name id is in ``wanted`` (labelled with its value), then the ``extra``
    (start, duration, label) intervals: (starts, ends, labels) sorted by start."""
    names = np.frombuffer(raw.c_name, dtype=np.int32)
    ts = np.frombuffer(raw.c_ts, dtype=np.float64)
    dur = np.frombuffer(raw.c_dur, dtype=np.float64)
    sel = np.isin(names, np.fromiter(wanted, dtype=np.int64, count=len(wanted)))
    starts = np.r_[ts[sel], [t for t, _d, _lab in extra]]
    ends = np.r_[ts[sel] + dur[sel], [t + d for t, d, _lab in extra]]
    labels = np.r_[[wanted[int(n)] for n in names[sel]], [lab for _t, _d, lab in extra]]
    order = np.argsort(starts, kind="stable")
    return starts[order], ends[order], labels.astype(np.int64)[order]


def _nccl_annotations(raw: RawTrace) -> list[tuple[float, float, int]]:
    """The ``nccl:`` CPU annotations as (start, duration, their collective's category)."""
    return [(t, d, CAT_INDEX[c]) for name, t, d, _tid in raw.cpu_annotations
            if name.startswith("nccl:") and (c := taxonomy.collective_category(name))]  # fmt: skip


def _gpu_categories(raw: RawTrace, name: np.ndarray, kind: np.ndarray, launch: np.ndarray,
                    coll: np.ndarray, enclosing: np.ndarray) -> np.ndarray:  # fmt: skip
    names = raw.names
    by_name = np.array([CAT_INDEX[taxonomy.kernel_category(n)] for n in names], dtype=np.int8)
    cat = by_name[name]  # int8 (as every per-event code here): 1 byte, not 8, per event
    cat[kind != 0] = CAT_INDEX["memory"]
    generic = np.array([taxonomy.needs_collective(n) for n in names], dtype=bool)
    copy = np.array([taxonomy.is_direct_copy(n) for n in names], dtype=bool)
    need = np.flatnonzero((kind == 0) & generic[name])
    if len(need):
        # the kernel's own "Collective name" first, then the CPU collective around its launch
        from_arg = np.array([CAT_INDEX.get(taxonomy.collective_category(names[c]), -1)
                             if c >= 0 else -1 for c in coll[need]])  # fmt: skip
        wanted = {i: CAT_INDEX[c] for i, n in enumerate(names)
                  if n.startswith("c10d::") and (c := taxonomy.collective_category(n[6:]))}  # fmt: skip
        s, e, lab = _cpu_intervals(raw, wanted, _nccl_annotations(raw))
        from_cpu = metrics.containing(s, e, lab, launch[need])
        resolved = np.where(from_arg >= 0, from_arg, from_cpu)
        cat[need] = np.where(resolved >= 0, resolved, CAT_INDEX["other_comm"])
    copies = np.flatnonzero((kind == 0) & copy[name])
    # direct_copy_kernel_cuda is a cast when an aten::to/_to_copy op launched it (only those:
    # a copy inside a collective's nccl: annotation is c10d moving its output, not a cast)
    wanted = {i: 1 for i, n in enumerate(names) if n in _CAST_OPS}
    if len(copies) and wanted:
        s, e, lab = _cpu_intervals(raw, wanted)
        cast = metrics.containing(s, e, lab, launch[copies]) > 0
        cat[copies[cast]] = CAT_INDEX["cast_quant"]
    # kernels launched inside a MoE/attention CPU op take its category (a routed-expert GEMM
    # is MoE time); communication kernels and memcpy/memset keep theirs
    hit = (kind == 0) & (enclosing >= 0) & ~np.isin(cat, _COMM_IDX)
    cat[hit] = enclosing[hit]
    return cat


def _enclosing(raw: RawTrace, kind: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Category index of the innermost MoE/attention CPU op around each kernel's launch
    (correlation id -> runtime call -> CPU time), or -1."""
    wanted = {i: CAT_INDEX[c] for i, n in enumerate(raw.names)
              if (c := taxonomy.enclosing_op_category(n))}  # fmt: skip
    out = metrics.containing(*_cpu_intervals(raw, wanted), launch, dtype=np.int8)
    out[kind != 0] = -1
    return out


def _in_embedding(raw: RawTrace, launch: np.ndarray) -> np.ndarray:
    """Whether each event was launched inside the vocab-parallel embedding: its Python
    frames (``VocabParallelEmbedding``, with_stack traces) or an ``aten::embedding`` op."""
    wanted = {i: 1 for i, n in enumerate(raw.names) if n == taxonomy.EMBEDDING_OP}
    frames = [(ts, d, 1) for _n, ts, d, _tid in raw.module_frames]
    return metrics.containing(*_cpu_intervals(raw, wanted, frames), launch) > 0


def _top_level_cpu(raw: RawTrace) -> np.ndarray:
    """Indices of CPU ops not nested in another op of the same thread."""
    ts = np.frombuffer(raw.c_ts, dtype=np.float64)
    dur = np.frombuffer(raw.c_dur, dtype=np.float64)
    tid = np.frombuffer(raw.c_tid, dtype=np.int32)
    order = np.lexsort((-dur, ts, tid))
    keep = np.zeros(len(ts), dtype=bool)
    bounds = np.flatnonzero(np.diff(tid[order])) + 1
    for grp in np.split(order, bounds):
        end = np.maximum.accumulate(ts[grp] + dur[grp])
        top = np.ones(len(grp), dtype=bool)
        top[1:] = ts[grp][1:] >= end[:-1]
        keep[grp[top]] = True
    return np.flatnonzero(keep)


def analyze(raw: RawTrace) -> RankResult:
    """One rank's analysis. ``raw``'s launch-only columns (``g_corr``, ``g_coll``,
    ``g_dtype``) are emptied once read: 16 bytes per GPU event (docs/benchmarks.md)."""
    has_gpu = len(raw.g_ts) > 0
    if has_gpu:
        kind = np.frombuffer(raw.g_kind, dtype=np.int8)
        start = np.frombuffer(raw.g_ts, dtype=np.float64)
        dur = np.frombuffer(raw.g_dur, dtype=np.float64)
        stream = np.frombuffer(raw.g_stream, dtype=np.int64)
        name = np.frombuffer(raw.g_name, dtype=np.int32)
        launch, graph = _launch_times(raw, np.frombuffer(raw.g_corr, dtype=np.int64))
        coll = np.frombuffer(raw.g_coll, dtype=np.int32)
        enclosing = _enclosing(raw, kind, launch)
        category = _gpu_categories(raw, name, kind, launch, coll, enclosing)
        arg_dtype = np.frombuffer(raw.g_dtype, dtype=np.int32)
    else:
        top = _top_level_cpu(raw)
        start = np.frombuffer(raw.c_ts, dtype=np.float64)[top]
        dur = np.frombuffer(raw.c_dur, dtype=np.float64)[top]
        tids = np.array([t if isinstance(t, int) else i for i, t in enumerate(raw.tids)])
        stream = tids[np.frombuffer(raw.c_tid, dtype=np.int32)[top]] if len(top) else top
        name = np.frombuffer(raw.c_name, dtype=np.int32)[top]
        kind = np.full(len(top), 3, dtype=np.int8)
        launch = start.copy()
        graph = np.zeros(len(top), dtype=bool)
        enclosing = np.full(len(top), -1, dtype=np.int8)
        by_name = [CAT_INDEX[taxonomy.cpu_op_category(n)] for n in raw.names]
        category = np.array(by_name, dtype=np.int8)[name]
        arg_dtype = _cpu_dtypes(raw, top, category)
        coll = None
    order = anatomy.issue_order(launch, start)
    relabelled = anatomy.moe_in_graphs(category, graph, order) if graph.any() else 0
    dtypes, dtype_of = _dtypes(raw, name, category, arg_dtype)
    del arg_dtype, coll
    raw.g_corr, raw.g_coll, raw.g_dtype = array("q"), array("i"), array("i")
    end = start + dur
    # Memory (a 10-million-event rank, docs/benchmarks.md): each per-event array is freed
    # once its last user has run; the launch times before the busy union is built.
    in_embedding = _in_embedding(raw, launch)
    launches = np.frombuffer(raw.r_ts, dtype=np.float64)[np.frombuffer(raw.r_graph, np.int8) > 0]
    found = _find_steps(raw, launches, graph)
    step = windows.assign(found, launch, start, end, raw.gpu_annotations)
    del launch
    detected = len(found)
    found, step, step_win = windows.own_windows(found, step, start, end)
    dropped = detected - len(found)  # steps that owned no GPU event (windows.py)
    busy = metrics.union(start, end)
    if not found:  # no step marks, or none of them launched anything: split at idle gaps
        del step
        found = steps_mod.gap_steps(busy.start, busy.end)
        step = windows.assign(found, None, start, end)
        found, step, step_win = windows.own_windows(found, step, start, end)
    step = step.astype(np.int32, copy=False)  # step indices: int32 halves the column
    step_busy = busy.within(step_win[:, 0], step_win[:, 1]) if len(step_win) else np.zeros(0)
    busy_us, span_us = busy.total, busy.span
    del busy
    times = _rank_times(busy_us, span_us, start, end, category, kind)
    del end
    marks = anatomy.Marks(enclosing, in_embedding, graph,
                          anatomy.embedding_names(raw.names, name))  # fmt: skip
    source = anatomy.comm_sources(category, step, order, marks)
    return RankResult(
        raw=raw, has_gpu=has_gpu, trace_start_us=_trace_start(raw), steps=found,
        step_windows=step_win, step_busy=step_busy, kind=kind, start=start, dur=dur,
        stream=stream, name=name, category=category, dtype=dtypes, dtype_of=dtype_of,
        step=step, times=times, graph=graph, graph_launches=len(launches),
        relabelled_moe=relabelled, steps_without_gpu=dropped, source=source,
    )  # fmt: skip


def _rank_times(busy_us: float, span_us: float, start: np.ndarray, end: np.ndarray,
                category: np.ndarray, kind: np.ndarray) -> metrics.RankTimes:  # fmt: skip
    """Busy, span and communication describe the rank: every GPU event of it, in a step or
    not (HTA's and TraceLens's busy time: the union of kernel and memcpy/memset
    intervals); the steps have their own windows and busy time. Exposed communication is
    communication during which no compute kernel runs: only the compute kernels that touch
    a communication interval can hide any, so only theirs are merged."""
    is_comm = np.isin(category, _COMM_IDX)
    comm = metrics.union(start[is_comm], end[is_comm])
    near = np.zeros(len(start), dtype=bool)
    if len(comm.start):
        for lo in range(0, len(start), 1 << 18):
            part = slice(lo, lo + (1 << 18))
            k = np.searchsorted(comm.start, end[part], side="right") - 1
            near[part] = (k >= 0) & (comm.end[np.maximum(k, 0)] >= start[part])
    near &= ~is_comm & (kind != 1) & (kind != 2)
    del is_comm
    compute = metrics.union(start[near], end[near])
    return metrics.times_of(busy_us, span_us, comm, compute)


def _find_steps(raw: RawTrace, launches: np.ndarray, graph: np.ndarray) -> list[steps_mod.Step]:
    """Annotated steps, else vLLM 0.10-0.11's execute_model frames, else one step per
    full-model graph launch (most kernels from graphs, hundreds per launch), else an nsys
    export's capture ranges; [] -> gaps."""
    found = steps_mod.annotated_steps(raw.cpu_annotations)
    if not found and raw.exec_frames:
        found = steps_mod.frame_steps(raw.exec_frames)
    if not found and len(launches) and graph.mean() > 0.5 and graph.sum() >= 200 * len(
        unique_sorted(launches)
    ):  # fmt: skip
        last = max((float(np.max(np.frombuffer(a, dtype=np.float64)))
                    for a in (raw.r_ts, raw.c_ts) if len(a)), default=0.0)  # fmt: skip
        found = steps_mod.graph_launch_steps(launches, last)
    if not found and raw.capture_ranges:  # an nsys export: its capture ranges
        found = steps_mod.capture_steps(raw.capture_ranges, *_time_range(raw))
    return found


def _time_range(raw: RawTrace) -> tuple[float, float]:
    """The earliest and latest time of any kept event (CPU or GPU), us."""
    ends = [float(np.max(np.frombuffer(t, np.float64) + np.frombuffer(d, np.float64)))
            for t, d in ((raw.g_ts, raw.g_dur), (raw.c_ts, raw.c_dur)) if len(t)]
    ends += [float(np.max(np.frombuffer(raw.r_ts, np.float64)))] if len(raw.r_ts) else []
    return _trace_start(raw), max(ends, default=_trace_start(raw))


def _cpu_dtypes(raw: RawTrace, top: np.ndarray, category: np.ndarray) -> np.ndarray:
    """Dtype label id per top-level CPU op: its own args (``Input type`` ['float'] on
    ``stepscope::all_reduce``, a ``dtype`` arg). A direct ``c10d::allreduce_`` only says
    ['TensorList', ...]: it takes the dtype of the first unclaimed backend annotation of
    the same collective (``gloo:all_reduce`` ['c10::BFloat16']) starting at or after it.
    gloo runs the work on its own thread, often after the op returned, in issue order."""
    c_dtype = np.frombuffer(raw.c_dtype, dtype=np.int32)
    out = c_dtype[top]
    missing = np.flatnonzero((out < 0) & np.isin(category, _COMM_IDX))
    if not len(missing) or not raw.comm_annotation_dtypes:
        return out
    pending: dict[int, deque[tuple[float, int]]] = {}  # category -> (ts, label), by time
    for t, name, label in sorted(raw.comm_annotation_dtypes):
        cat = taxonomy.collective_category(name)
        if cat:
            pending.setdefault(CAT_INDEX[cat], deque()).append((t, label))
    ts = np.frombuffer(raw.c_ts, dtype=np.float64)[top]
    for i in missing[np.argsort(ts[missing], kind="stable")]:
        queue = pending.get(int(category[i]))
        while queue and queue[0][0] < ts[i]:
            queue.popleft()  # an annotation before the op belongs to an earlier (or unseen) one
        if queue:
            out[i] = queue.popleft()[1]
    return out


def _dtypes(raw: RawTrace, name, category, arg_dtype) -> tuple[list[str | None], np.ndarray]:
    """Normalised dtype for collective events; None elsewhere."""
    values: list[str | None] = [None]
    out = np.zeros(len(name), dtype=np.int32)
    comm = np.flatnonzero(np.isin(category, _COMM_IDX))
    if not len(comm):
        return values, out
    pairs = np.stack([name[comm], arg_dtype[comm]], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    index: dict[str | None, int] = {None: 0}
    codes = []
    for n, d in uniq:
        value = taxonomy.collective_dtype(raw.names[n], raw.names[d] if d >= 0 else None)
        codes.append(intern(index, values, value))
    out[comm] = np.array(codes, dtype=np.int32)[inverse.reshape(-1)]
    return values, out


def _trace_start(raw: RawTrace) -> float:
    firsts = [float(np.min(np.frombuffer(a, dtype=np.float64)))
              for a in (raw.g_ts, raw.c_ts, raw.r_ts) if len(a)]  # fmt: skip
    firsts += [a[1] for a in raw.cpu_annotations] + [a[1] for a in raw.gpu_annotations]
    return min(firsts) if firsts else 0.0
