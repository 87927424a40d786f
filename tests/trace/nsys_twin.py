"""Kineto trace -> the Nsight Systems SQLite export of the same work (a test helper).

No public nsys export of an LLM server exists (no NCCL, no CUDA graph in the real ones of
tests/fixtures/nsys), so a real Kineto trace is written again as nsys 2024.5 would have
exported it: the CREATE TABLE statements are the real 2024.5 file's (schema 3.13.2;
``CUPTI_ACTIVITY_KIND_MEMSET`` and ``NVTX_EVENTS``, which that lazy export left out, are
the real 2022.2 file's), its ``META_DATA_EXPORT`` rows are copied, names go through
``StringIds``, times are ns since the session start, ``globalPid``/``globalTid`` pack the
process id in bits 24-47, runtime calls carry nsys's versioned names
(``cudaLaunchKernel_v7000``), a graph replay's kernels share their launch's correlation id
and carry a ``graphNodeId`` (``--cuda-graph-trace=node``), and CPU annotations and ops
become NVTX push/pop ranges (ops as torch's emit_nvtx names them: ``aten::to, seq = N``).
Each Kineto file is one process on its own GPU; several files can share one export (one
``nsys profile`` of the whole job) or each have their own.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers import FIXTURES

NSYS = FIXTURES / "nsys"
SCHEMA_2024 = NSYS / "pipit_cloverleaf_nsys2024.5.sqlite"
SCHEMA_2022 = NSYS / "pipit_saxpy_mpi_nsys2022.2.sqlite"
TABLES_2024 = ("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_RUNTIME", "META_DATA_EXPORT", "TARGET_INFO_GPU",
               "TARGET_INFO_SYSTEM_ENV", "TARGET_INFO_SESSION_START_TIME", "PROCESSES",
               "ThreadNames")  # fmt: skip
TABLES_2022 = ("CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")
VM = 1 << 48  # the vmId part of a globalPid in the real files (281474976710656)
NVTX_PUSH_POP = 59
# nsys spells runtime calls with the version of their entry point
_VERSIONED = {"cudaLaunchKernel": "cudaLaunchKernel_v7000", "cudaGraphLaunch":
              "cudaGraphLaunch_v10000", "cudaMemcpyAsync": "cudaMemcpyAsync_v3020",
              "cudaMemsetAsync": "cudaMemsetAsync_v3020", "cudaMemcpy": "cudaMemcpy_v3020"}  # fmt: skip
_COPY_KIND = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "PtoP": 10, "HtoH": 9}


def load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def short_name(name: str) -> str:
    """A kernel's base name as nsys's shortName gives it: no return type, namespaces,
    template or call arguments (``void at::native::foo<int>(...)`` -> ``foo``)."""
    base = re.sub(r"^void ", "", name)
    depth, cut = 0, len(base)
    for i, ch in enumerate(base):  # the first ( or < outside brackets ends the name
        if ch in "<(" and depth == 0:
            cut = i
            break
    return base[:cut].rsplit("::", 1)[-1] or name


def _ddl(source: Path, tables: tuple[str, ...]) -> list[str]:
    con = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        found = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'"))
    finally:
        con.close()
    return [found[t] for t in tables]


def _export_meta() -> list[tuple[str, str]]:
    con = sqlite3.connect(f"file:{SCHEMA_2024}?mode=ro", uri=True)
    try:
        return con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
    finally:
        con.close()


class _Writer:
    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.strings: dict[str, int] = {}

    def sid(self, text: str) -> int:
        i = self.strings.get(text)
        if i is None:
            i = self.strings[text] = len(self.strings) + 1
            self.con.execute("INSERT INTO StringIds VALUES (?, ?)", (i, text))
        return i


def write_twin(kineto: list[Path], out: Path, host: str = "gpu-node-7", capture_ranges: int = 0,
               annotations: bool = True) -> Path:  # fmt: skip
    """Write ``kineto`` (one process and GPU each, in order) as one nsys export ``out``.
    ``capture_ranges``: cut each process's time into that many cudaProfilerStart..Stop
    ranges; ``annotations``: False leaves the CPU annotations (the step marks) out."""
    docs = [load(p) for p in kineto]
    stamps = [e["ts"] for d in docs for e in d["traceEvents"] if isinstance(e.get("ts"), int | float)]
    base_us = min(stamps)
    con = sqlite3.connect(out)
    for sql in [*_ddl(SCHEMA_2024, TABLES_2024), *_ddl(SCHEMA_2022, TABLES_2022)]:
        con.execute(sql)
    w = _Writer(con)
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", _export_meta())
    epoch = int(docs[0].get("baseTimeNanoseconds") or 0) + round(base_us * 1000)
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)",
                (epoch, "2025-06-01T00:00:00", "2025-06-01T00:00:00"))  # fmt: skip
    con.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, ?, ?, ?, ?)",
                (VM, "Local (CLI)", "Hostname", 207, host))  # fmt: skip
    for device, doc in enumerate(docs):
        _process(w, doc, device, 1000 + device, base_us, capture_ranges, annotations)
    con.commit()
    con.close()
    return out


def _ns(us: float, base_us: float) -> int:
    return round((us - base_us) * 1000)


def _process(w: _Writer, doc: dict, device: int, pid: int, base_us: float,
             capture_ranges: int, annotations: bool) -> None:  # fmt: skip
    con = w.con
    gpid = VM | (pid << 24)
    props = doc.get("deviceProperties") or [{}]
    gpu_name = next((p["name"] for p in props if p.get("name")), "NVIDIA H100 80GB HBM3")
    con.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, cuDevice) VALUES (?, ?, ?, ?)",
                (VM, device, gpu_name, device))  # fmt: skip
    con.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (gpid, pid, "python3"))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    graph_corr = {e["args"]["correlation"] for e in events
                  if e.get("cat") in ("cuda_runtime", "cuda_driver") and "GraphLaunch" in e["name"]}  # fmt: skip
    node = 0
    seq = 0
    for e in events:
        cat, args = e.get("cat"), e.get("args") or {}
        start = _ns(e["ts"], base_us)
        end = start + round(e["dur"] * 1000)
        tid = e.get("tid") if isinstance(e.get("tid"), int) else 1
        corr = args.get("correlation")
        if cat == "kernel":
            graph_node = None
            if corr in graph_corr:
                node += 1
                graph_node = node
            grid, block = args.get("grid") or [1, 1, 1], args.get("block") or [1, 1, 1]
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, "
                "streamId, correlationId, globalPid, demangledName, shortName, "
                "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
                "staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, "
                "localMemoryTotal, gridId, graphNodeId) "
                "VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, 32, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0, ?, ?)",
                (start, end, device, args.get("stream", tid), corr, gpid, w.sid(e["name"]),
                 w.sid(short_name(e["name"])), *grid, *block, node, graph_node),
            )  # fmt: skip
        elif cat == "gpu_memcpy":
            kind = next((v for k, v in _COPY_KIND.items() if k in e["name"]), 0)
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, "
                        "contextId, streamId, correlationId, globalPid, bytes, copyKind) "
                        "VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)",
                        (start, end, device, args.get("stream", tid), corr, gpid,
                         int(args.get("bytes") or 0), kind))  # fmt: skip
        elif cat == "gpu_memset":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, "
                        "contextId, streamId, correlationId, globalPid, value, bytes) "
                        "VALUES (?, ?, ?, 1, ?, ?, ?, 0, ?)",
                        (start, end, device, args.get("stream", tid), corr, gpid,
                         int(args.get("bytes") or 0)))  # fmt: skip
        elif cat in ("cuda_runtime", "cuda_driver") and isinstance(corr, int):
            name = _VERSIONED.get(e["name"], e["name"])
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, "
                        "globalTid, correlationId, nameId, returnValue) "
                        "VALUES (?, ?, 0, ?, ?, ?, 0)",
                        (start, end, gpid | tid, corr, w.sid(name)))  # fmt: skip
        elif cat == "cpu_op" or (cat == "user_annotation" and annotations):
            seq += 1
            text = e["name"] if cat == "user_annotation" else f"{e['name']}, seq = {seq}"
            con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, "
                        "domainId) VALUES (?, ?, ?, ?, ?, 0)",
                        (start, end, NVTX_PUSH_POP, text, gpid | tid))  # fmt: skip
    if capture_ranges:
        lo = min(_ns(e["ts"], base_us) for e in events) - 1000
        hi = max(_ns(e["ts"] + e["dur"], base_us) for e in events) + 1000
        cuts = [lo + (hi - lo) * k // capture_ranges for k in range(capture_ranges + 1)]
        calls = [(a + (k > 0), "cudaProfilerStart_v4000") for k, a in enumerate(cuts[:-1])]
        calls += [(b, "cudaProfilerStop_v4000") for b in cuts[1:]]
        for at, name in calls:
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, "
                        "globalTid, correlationId, nameId, returnValue) "
                        "VALUES (?, ?, 0, ?, NULL, ?, 0)", (at, at, gpid | 1, w.sid(name)))  # fmt: skip
