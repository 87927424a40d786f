"""Read an Nsight Systems SQLite export into the event columns every reader fills.

One export can hold several processes and GPUs (``nsys profile --trace-fork-before-exec
=true vllm serve ...`` records every worker): each (process, device) pair that ran GPU
work is one rank, in device order. Per rank the columns are filled as the Kineto reader
fills them (collectors/trace/columns.py), so classification, steps, windows and anatomy
are the same code:

- kernels, memcpy and memset (and whole CUDA-graph replays when the report was taken with
  ``--cuda-graph-trace=graph``, which lists no node kernels) are the GPU events; a kernel is
  classified by its ``demangledName`` (what Kineto writes as a kernel's name) and shown by
  its ``shortName``;
- launch calls of ``CUPTI_ACTIVITY_KIND_RUNTIME`` (``cudaLaunchKernel*``,
  ``cudaGraphLaunch*``, ``cudaMemcpy*``...) link GPU events to CPU time by correlation id;
- NVTX push/pop and start/end ranges are the CPU annotations and ops: vLLM's CUDA profiler
  names each step with an NVTX range (vllm-project/vllm ``vllm/profiler/wrapper.py``
  ``CudaProfilerWrapper.annotate_context_manager`` -> ``torch.cuda.nvtx.range``, the
  ``execute_context_...`` name ``vllm/v1/worker/gpu_worker.py`` builds); torch's
  ``emit_nvtx`` ranges (``aten::to, seq = 12, ...``: pytorch ``torch/csrc/profiler/util.cpp``
  ``getNvtxStr``) are cut back to the op's name;
- ``cudaProfilerStart``/``Stop`` calls bound the capture ranges (one step each when there is
  no step range and no graph launch per step); without them the capture is one range.
"""

from __future__ import annotations

import re
import sqlite3
from array import array
from itertools import chain
from pathlib import Path

import numpy as np

from collectors.core.errors import InputError
from collectors.trace.columns import RawTrace, intern
from collectors.trace.readers import nsys_schema as schema
from collectors.trace.readers.source import file_digest

_LAUNCH = re.compile(r"Launch|[Mm]emcpy|[Mm]emset")
_PROFILER = re.compile(r"^cu(?:da)?ProfilerSt(art|op)")
_EMIT_NVTX_TAIL = re.compile(r", (?:seq|op_id|sizes|input_op_ids) = .*$")
# ENUM_CUDA_MEMCPY_OPER ids -> Kineto's spelling of the copy ("Memcpy HtoD (...)")
_COPY = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
         9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}  # fmt: skip
_MEMSET_NAME = "Memset (Device)"
_KERNEL, _MEMCPY, _MEMSET = 0, 1, 2


def read_nsys(path: Path) -> list[RawTrace]:
    """One RawTrace per (process, device) with GPU work, in device order; [] when the
    export holds no GPU event. Raises NotATrace for a SQLite file that is no export."""
    ex = schema.open_export(path)
    try:
        gpu, names, shorts = _gpu_events(ex)
        if not len(gpu["start"]):
            return []
        runtime, rt_names = _runtime(ex)
        nvtx = _nvtx(ex)
    except (sqlite3.DatabaseError, ValueError, TypeError, OverflowError) as exc:
        # a damaged page, or text or a huge number where nsys writes an integer
        raise InputError(f"{path}: an unreadable Nsight Systems export ({type(exc).__name__}: "
                         f"{str(exc)[:120]})") from None  # fmt: skip
    finally:
        ex.con.close()
    size, digest = path.stat().st_size, file_digest(path)
    keys = [(int(k >> 32), int(k & 0xFFFFFFFF))  # (device, process) pairs, device order
            for k in np.unique((gpu["device"] << 32) | gpu["pid"])]  # fmt: skip
    out = []
    for device, pid in keys:
        raw = RawTrace(path=path, size_bytes=size, digest=f"{digest}:{pid}:{device}")
        sel = (gpu["device"] == device) & (gpu["pid"] == pid)
        _fill_gpu(raw, {k: v[sel] for k, v in gpu.items()}, names, shorts)
        _fill_runtime(raw, runtime[runtime[:, 2] == pid], rt_names)
        _fill_nvtx(raw, [r for r in nvtx if r[2] == pid])
        whole = int((gpu["name"][sel] <= -1000).sum())  # replays read whole (graph mode)
        raw.meta = _meta(ex, device, pid, len(keys), whole)
        raw.events_total = raw.events_kept = len(raw.g_ts) + len(raw.r_ts) + len(raw.c_ts)
        out.append(raw)
    return out


def _gpu_events(ex: schema.Export) -> tuple[dict[str, np.ndarray], dict, dict]:
    """Every GPU event as columns (kind, start/end ns, device, stream, corr, pid, name key,
    graph node), the names of the keys and the kernels' short names. Name keys >= 0 are
    StringIds ids; negative ones are made here (memcpy, memset, whole graph replays)."""
    parts: list[np.ndarray] = []
    names: dict[int, str] = {}
    if ex.has(schema.KERNEL, "demangledName"):
        t = schema.KERNEL
        parts.append(_rows(ex, f"SELECT {_KERNEL}, start, end, deviceId, streamId, "
                           f"coalesce(correlationId, -1), coalesce(globalPid, 0), demangledName, "
                           f"coalesce({ex.col(t, 'graphNodeId')}, -1), "
                           f"coalesce({ex.col(t, 'shortName')}, demangledName) FROM {t}"))  # fmt: skip
    if ex.has(schema.MEMCPY):
        t = schema.MEMCPY
        parts.append(_rows(ex, f"SELECT {_MEMCPY}, start, end, deviceId, streamId, "
                           f"coalesce(correlationId, -1), coalesce(globalPid, 0), "
                           f"-1 - coalesce({ex.col(t, 'copyKind', '0')}, 0), "
                           f"coalesce({ex.col(t, 'graphNodeId')}, -1), 0 FROM {t}"))  # fmt: skip
        names.update({-1 - k: f"Memcpy {v}" for k, v in _COPY.items()})
        names[-1] = "Memcpy"
    if ex.has(schema.MEMSET):
        t = schema.MEMSET
        parts.append(_rows(ex, f"SELECT {_MEMSET}, start, end, deviceId, streamId, "
                           f"coalesce(correlationId, -1), coalesce(globalPid, 0), -100, "
                           f"coalesce({ex.col(t, 'graphNodeId')}, -1), 0 FROM {t}"))  # fmt: skip
        names[-100] = _MEMSET_NAME
    if ex.has(schema.GRAPH_TRACE, "deviceId", "graphId"):
        # a whole replay (--cuda-graph-trace=graph); node mode lists the kernels instead
        t = schema.GRAPH_TRACE
        rows = _rows(ex, f"SELECT {_KERNEL}, start, end, deviceId, streamId, "
                     f"coalesce(correlationId, -1), coalesce(globalPid, 0), "
                     f"-1000 - graphId, 0, 0 FROM {t}")  # fmt: skip
        names.update({int(k): f"CUDA graph {-1000 - int(k)} (whole replay)"
                      for k in np.unique(rows[:, 7])})  # fmt: skip
        parts.append(rows)
    rows = np.concatenate(parts) if parts else np.zeros((0, 10), dtype=np.int64)
    rows = rows[(rows[:, 2] >= rows[:, 1])]  # a negative duration is no event
    ids = np.unique(np.concatenate((rows[rows[:, 7] >= 0, 7], rows[rows[:, 0] == _KERNEL, 9])))
    names.update(_strings(ex, ids[ids >= 0]))
    kernels = rows[(rows[:, 0] == _KERNEL) & (rows[:, 7] >= 0)]
    pairs = np.unique((kernels[:, 7] << 32) | kernels[:, 9])  # (demangled, short) id pairs
    shorts = {names[int(k >> 32)]: names[int(k & 0xFFFFFFFF)] for k in pairs
              if int(k & 0xFFFFFFFF) in names
              and names[int(k & 0xFFFFFFFF)] != names[int(k >> 32)]}  # fmt: skip
    cols = ("kind", "start", "end", "device", "stream", "corr", "pid", "name", "node")
    gpu = {c: rows[:, i] for i, c in enumerate(cols)}
    gpu["pid"] = gpu["pid"] >> 24
    return gpu, names, shorts


def _runtime(ex: schema.Export) -> tuple[np.ndarray, dict[int, str]]:
    """Launch and profiler-control calls: (correlation, start ns, pid, name id) rows."""
    if not ex.has(schema.RUNTIME, "nameId", "correlationId"):
        return np.zeros((0, 4), dtype=np.int64), {}
    ids = [r[0] for r in ex.con.execute(f"SELECT DISTINCT nameId FROM {schema.RUNTIME}")]
    found = _strings(ex, np.array(ids, dtype=np.int64))
    wanted = {i: n for i, n in found.items() if _LAUNCH.search(n) or _PROFILER.match(n)}
    if not wanted:
        return np.zeros((0, 4), dtype=np.int64), {}
    marks = ",".join(str(i) for i in wanted)
    rows = _rows(ex, f"SELECT coalesce(correlationId, -1), start, "
                 f"coalesce({ex.col(schema.RUNTIME, 'globalTid')}, 0), nameId "
                 f"FROM {schema.RUNTIME} WHERE nameId IN ({marks})")  # fmt: skip
    rows[:, 2] >>= 24
    return rows, wanted


def _nvtx(ex: schema.Export) -> list[tuple[int, int, int, int, str]]:
    """NVTX ranges: (start ns, end ns, pid, tid, text)."""
    t = schema.NVTX
    if not ex.has(t, "start", "end", "eventType"):
        return []
    text = "n.text" if "text" in ex.tables[t] else "NULL"
    join = ""
    if "textId" in ex.tables[t]:
        text = f"coalesce({text}, s.value)"
        join = "LEFT JOIN StringIds s ON s.id = n.textId"
    types = ",".join(map(str, schema.NVTX_RANGES))
    sql = (f"SELECT n.start, n.end, coalesce(n.{ex.col(t, 'globalTid')}, 0), {text} FROM {t} n "
           f"{join} WHERE n.eventType IN ({types}) AND n.end IS NOT NULL AND n.end >= n.start")  # fmt: skip
    return [(s, e, g >> 24, g & 0xFFFFFF, name) for s, e, g, name in ex.con.execute(sql) if name]


def _rows(ex: schema.Export, sql: str) -> np.ndarray:
    """An all-integer query as an (n, columns) array, straight from the cursor's rows."""
    cur = ex.con.execute(sql)
    flat = np.fromiter(chain.from_iterable(cur), dtype=np.int64)
    return flat.reshape(-1, len(cur.description))


def _strings(ex: schema.Export, ids: np.ndarray) -> dict[int, str]:
    out: dict[int, str] = {}
    ids = [int(i) for i in np.unique(ids)]
    for k in range(0, len(ids), 900):  # SQLite's bound-parameter limit
        chunk = ids[k : k + 900]
        marks = ",".join("?" * len(chunk))
        out.update(ex.con.execute(f"SELECT id, value FROM StringIds WHERE id IN ({marks})",
                                  chunk).fetchall())  # fmt: skip
    return out


def _fill_gpu(raw: RawTrace, gpu: dict[str, np.ndarray], names: dict[int, str],
              shorts: dict[str, str]) -> None:  # fmt: skip
    order = np.argsort(gpu["start"], kind="stable")
    keys, local = np.unique(gpu["name"][order], return_inverse=True)
    ids: dict[str, int] = {}
    remap = np.array([intern(ids, raw.names, names.get(int(k), f"unknown #{int(k)}"))
                      for k in keys], dtype=np.int64)  # fmt: skip
    raw.g_kind = array("b", gpu["kind"][order].astype(np.int8).tobytes())
    raw.g_ts = array("d", (gpu["start"][order] / 1000.0).tobytes())
    raw.g_dur = array("d", ((gpu["end"] - gpu["start"])[order] / 1000.0).tobytes())
    raw.g_stream = array("q", gpu["stream"][order].tobytes())
    raw.g_name = array("i", remap[local.reshape(-1)].astype(np.int32).tobytes())
    raw.g_corr = array("q", gpu["corr"][order].tobytes())
    raw.g_coll = array("i", np.full(len(order), -1, dtype=np.int32).tobytes())
    raw.g_dtype = array("i", np.full(len(order), -1, dtype=np.int32).tobytes())
    raw.short_names = {n: shorts[n] for n in raw.names if n in shorts}


def _fill_runtime(raw: RawTrace, rows: np.ndarray, names: dict[int, str]) -> None:
    launch_ids = [i for i, n in names.items() if _LAUNCH.search(n)]
    graph_ids = [i for i, n in names.items() if "GraphLaunch" in n]
    launch = np.isin(rows[:, 3], launch_ids)
    kept = rows[launch]
    raw.r_corr = array("q", kept[:, 0].tobytes())
    raw.r_ts = array("d", (kept[:, 1] / 1000.0).tobytes())
    raw.r_graph = array("b", np.isin(kept[:, 3], graph_ids).astype(np.int8).tobytes())
    raw.capture_ranges = _capture_ranges(rows[~launch], names)


def _capture_ranges(rows: np.ndarray, names: dict[int, str]) -> list[tuple[float, float]]:
    """(start, stop) us of each cudaProfilerStart..Stop; an open end is NaN (closed at the
    capture's edge by the analysis); without profiler-control calls the capture is one
    range, (NaN, NaN)."""
    out: list[tuple[float, float]] = []
    start = None
    for _corr, ts, _pid, nid in sorted(rows.tolist(), key=lambda r: r[1]):
        is_start = _PROFILER.match(names[int(nid)]).group(1) == "art"
        if is_start:
            start = ts / 1000.0 if start is None else start
        else:
            out.append((np.nan if start is None else start, ts / 1000.0))
            start = None
    if start is not None:
        out.append((start, np.nan))
    return out or [(np.nan, np.nan)]


def _fill_nvtx(raw: RawTrace, rows: list[tuple[int, int, int, int, str]]) -> None:
    """NVTX ranges -> CPU annotations (steps, ``nccl:`` ranges) and CPU ops (enclosing ops,
    casts, c10d collectives: the names torch's emit_nvtx gives them, cut back)."""
    tids: dict[int, int] = {}
    name_ids = {n: i for i, n in enumerate(raw.names)}
    ts, dur, tid_of, name_of = [], [], [], []
    for start, end, _pid, tid, text in sorted(rows):
        name = _EMIT_NVTX_TAIL.sub("", text)
        raw.cpu_annotations.append((name, start / 1000.0, (end - start) / 1000.0, tid))
        ts.append(start / 1000.0)
        dur.append((end - start) / 1000.0)
        tid_of.append(intern(tids, raw.tids, tid))
        name_of.append(intern(name_ids, raw.names, name))
    raw.c_ts, raw.c_dur = array("d", ts), array("d", dur)
    raw.c_tid, raw.c_name = array("i", tid_of), array("i", name_of)
    raw.c_dtype = array("i", [-1] * len(ts))


def _meta(ex: schema.Export, device: int, pid: int, ranks_in_file: int,
          graph_replays: int) -> dict:  # fmt: skip
    name = ex.gpus.get(device)
    return {
        "deviceProperties": [{"id": device, "name": name}] if name else [],
        "baseTimeNanoseconds": ex.start_epoch_ns,
        "nsys": {"version": ex.version, "schema": ex.meta.get("EXPORT_SCHEMA_VERSION"),
                 "device": device, "pid": pid & 0xFFFFFF, "ranks_in_file": ranks_in_file,
                 "graph_replays_whole": graph_replays, **ex.system},
    }  # fmt: skip
