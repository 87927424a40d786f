"""nccl-tests outputs written for the tests, one per era and noise case (REFERENCE.md §7).

Rows are printed with nccl-tests' own printf widths; bandwidths follow its formulas, so
``busbw / algbw`` gives the rank count back.
"""

from __future__ import annotations

import json

FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "alltoall": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n}  # fmt: skip


def half(size: int, time_us: float, op: str, n: int, wrong: str = "0") -> list[str]:
    alg = size / (time_us * 1e3)
    return [f"{time_us:7.2f}", f"{alg:6.2f}", f"{alg * FACTOR[op](n):6.2f}", f"{wrong:>6}"]


def row(size: int, count: int, dtype: str, redop: str, root: str | None, *halves: list[str]) -> str:
    parts = [f"{size:12d}", f"{count:12d}", f"{dtype:>8}", f"{redop:>6}"]
    if root is not None:
        parts.append(f"{root:>6}")
    for h in halves:
        parts += h
    return "  ".join(parts)


def busbws(*lines: str) -> list[float]:
    """The busbw column of both halves of rows, as printed (what the footer averages)."""
    out = []
    for line in lines:
        t = line.split()
        tail = t[-8:]
        out += [float(tail[2]), float(tail[6])]
    return out


# ---- <= 2.12: no root column, `error` column (max error, not a count) ----------------------
OLD_ROWS = [
    row(8, 2, "float", "sum", None, half(8, 10.52, "all_reduce", 2, "0e+00"),
        half(8, 10.41, "all_reduce", 2, "0e+00")),
    row(1024, 256, "float", "sum", None, half(1024, 11.02, "all_reduce", 2, "0e+00"),
        half(1024, 10.98, "all_reduce", 2, "0e+00")),
    row(1048576, 262144, "float", "sum", None, half(1048576, 40.12, "all_reduce", 2, "2e-06"),
        half(1048576, 39.87, "all_reduce", 2, "2e-06")),
]  # fmt: skip
OLD_AVG = sum(busbws(*OLD_ROWS)) / 6
OLD_ERA = "\n".join([
    "# nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 1024(factor) warmup iters: 5 iters: 20 validation: 1 ",
    "#",
    "# Using devices",
    "#   Rank  0 Pid  41234 on     node-a device  0 [0x1b] Tesla V100-SXM2-32GB",
    "#   Rank  1 Pid  41234 on     node-a device  1 [0x1c] Tesla V100-SXM2-32GB",
    "#",
    "#                                                       out-of-place                       in-place          ",
    "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
    "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    *OLD_ROWS,
    "# Out of bounds values : 0 OK",
    f"# Avg bus bandwidth    : {OLD_AVG:g} ",
    "#",
    "",
])  # fmt: skip

# <= 2.12 alltoall prints an empty redop: its rows have one token fewer.
OLD_ALLTOALL = "\n".join([
    "# nThread 1 nGpus 4 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 ",
    "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
    "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    row(1024, 64, "float", "", None, half(1024, 20.0, "alltoall", 4, "0e+00"), half(1024, 21.0, "alltoall", 4, "0e+00")),
    row(2048, 128, "float", "", None, half(2048, 22.0, "alltoall", 4, "0e+00"), half(2048, 23.0, "alltoall", 4, "0e+00")),
    row(4096, 256, "float", "", None, half(4096, 30.0, "alltoall", 4, "0e+00"), half(4096, 31.0, "alltoall", 4, "0e+00")),
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 0.05 ",
])  # fmt: skip

# The oldest builds print time in ms ("%7.3f" of seconds x 1e3).
MS_ERA = "\n".join([
    "#                                                 out-of-place                    in-place",
    "#       size         count    type   redop     time   algbw   busbw    error     time   algbw   busbw    error",
    "#        (B)    (elements)                     (ms)  (GB/s)  (GB/s)              (ms)  (GB/s)  (GB/s)",
    "     1048576        262144   float     sum    0.100   10.49   15.73    1e-06    0.099   10.59   15.89    1e-06",
    "# Avg bus bandwidth    : 15.81",
])  # fmt: skip

# ---- 2.13 - 2.17.2: root column, #wrong; alltoall in-place N/A ------------------------------
MID_ROWS = [
    row(0, 0, "bfloat16", "none", "-1", ["   0.31", "  0.00", "  0.00", "     0"], ["   0.29", "  0.00", "  0.00", "     0"]),
    row(14336, 896, "bfloat16", "none", "-1", half(14336, 22.50, "alltoall", 8), ["    N/A", "   N/A", "   N/A", "   N/A"]),
    row(229376, 14336, "bfloat16", "none", "-1", half(229376, 1007.0, "alltoall", 8), ["    N/A", "   N/A", "   N/A", "   N/A"]),
]  # fmt: skip
MID_ERA = "\n".join([
    "# nThread 1 nGpus 1 minBytes 0 maxBytes 229376 step: 16(factor) warmup iters: 5 iters: 50 agg iters: 1 validation: 1 graph: 0",
    "#",
    "# Using devices",
    *[f"#  Rank {r:2d} Group  0 Pid  {5000 + r:5d} on  pcie-box device {r:2d} [0x{0x18 + r:02x}] NVIDIA RTX PRO 6000 Blackwell Server Edition" for r in range(8)],
    "#",
    "#                                                              out-of-place                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    *MID_ROWS,
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 0.0756 ",
    "#",
])  # fmt: skip


def _new_era(op: str, program: str, n: int, rows: list[str], version: str, unalign: bool) -> str:
    tail = " unalign: 0" if unalign else ""
    return "\n".join([
        f"# nccl-tests version {version} nccl-headers=22105 nccl-library=22105",
        f"# Collective test starting: {program}",
        f"# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0{tail}",
        "#",
        "# Using devices",
        *[f"#  Rank {r:2d} Group  0 Pid  {7000 + r:5d} on  nvl-node device {r:2d} [0000:{0x18 + r:02x}:00] NVIDIA H100 80GB HBM3" for r in range(n)],
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
        *rows,
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws(*rows)) / (2 * len(rows)):g} ",
        "#",
        f"# Collective test concluded: {program}",
        "",
    ])  # fmt: skip


NEW_ROWS = [
    row(8, 2, "float", "sum", "-1", half(8, 14.1, "all_reduce", 8), half(8, 13.9, "all_reduce", 8)),
    row(65536, 16384, "float", "sum", "-1", half(65536, 18.2, "all_reduce", 8), half(65536, 18.0, "all_reduce", 8)),
    row(134217728, 33554432, "float", "sum", "-1", half(134217728, 740.5, "all_reduce", 8), half(134217728, 738.1, "all_reduce", 8)),
]  # fmt: skip
V2_17_3 = _new_era("all_reduce", "all_reduce_perf", 8, NEW_ROWS, "2.17.3", unalign=False)
V2_18 = _new_era("all_reduce", "all_reduce_perf", 8, NEW_ROWS, "2.18.1", unalign=True)

# ---- noise cases (each on the 2.18 all_reduce log) ------------------------------------------
MPIRUN = "\n".join(f"[1,0]<stdout>:{line}" for line in V2_18.splitlines())
BRACKET = "\n".join(f"[0] {line}" for line in V2_18.splitlines())
SRUN = "\n".join(f"0: {line}" for line in V2_18.splitlines())


def _insert_after(text: str, marker: str, lines: list[str]) -> str:
    out = []
    for line in text.splitlines():
        out.append(line)
        if marker in line:
            out += lines
    return "\n".join(out)


NCCL_INFO = _insert_after(V2_18, "  65536  ", [
    "nvl-node:7000:7012 [0] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7",
    "nvl-node:7000:7012 [0] NCCL INFO 134217728 33554432 float sum -1 P2P/CUMEM/read",
    "nvl-node:7000:7012 [0] NCCL INFO Connected all rings",
])  # fmt: skip
NCCL_VERSION_LINES = "NCCL version 2.21.5+cuda12.4\n" + _insert_after(
    V2_18,
    "Collective test starting",
    ["nvl-node:7000:7000 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"],
)
NO_FOOTER = "\n".join(line for line in V2_18.splitlines() if "Avg bus bandwidth" not in line)
NO_PREAMBLE = "\n".join(
    line for line in V2_18.splitlines()
    if not any(k in line for k in ("Rank", "nccl-tests version", "nThread", "Using devices",
                                   "Collective test"))
)  # fmt: skip

# Per-iteration columns (newest builds) and -R timestamps.
PER_ITER = "\n".join([
    "# nccl-tests version 2.18.3 nccl-headers=22803 nccl-library=22803",
    "# Collective test starting: reduce_scatter_perf",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%",
    "        4096           512     float     sum      -1    20.10    0.20    0.15      0    19.50    25.00    24.80     3.10    20.00    0.20    0.15      0    19.40    24.00    23.90     2.90  2025-06-01 10:00:00",
    "# Avg bus bandwidth    : 0.15",
])  # fmt: skip


def json_report(n: int = 4) -> str:
    """The -J file's shape (nccl-tests src/util.cu, JSON_FILE_VERSION 2)."""
    results = []
    for size, t in ((1024, 12.5), (1048576, 60.0)):
        alg = size / (t * 1e3)
        bus = alg * (n - 1) / n
        results.append({
            "size": size, "count": size // 4 // n, "type": "float", "redop": "none",
            "root": "    -1",
            "out_of_place": {"time": t, "alg_bw": alg, "bus_bw": bus, "nwrong": 0.0},
            "in_place": {"time": t * 1.01, "alg_bw": alg / 1.01, "bus_bw": bus / 1.01,
                         "nwrong": 0.0},
            "actual_iterations": 20, "experiment_name": "",
        })  # fmt: skip
    avg = sum(r[h]["bus_bw"] for r in results for h in ("out_of_place", "in_place")) / 4
    doc = {
        "version": 2, "start_time": "2026-11-29 10:00:00",
        "args": ["./build/all_gather_perf", "-b", "1K", "-e", "1M", "-J", "out.json"],
        "env": ["PATH=/usr/bin", "NCCL_DEBUG=INFO", "NCCL_P2P_LEVEL=SYS"],
        "nccl_version": 22703,
        "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": 1024, "maximum_bytes": 1048576,
                   "step_factor": 2, "warmup_iters": 5, "iterations": 20,
                   "aggregated_iterations": 1, "validation": 1, "graph": 0,
                   "blocking_collectives": "false", "per_iter_timing": "false",
                   "parallel_init": "false",
                   "devices": [{"rank": r, "group": 0, "pid": 100 + r, "hostname": "json-host",
                                "device": r, "device_hex": f"0000:{r + 16:02x}:00",
                                "device_info": "NVIDIA H200"} for r in range(n)]},
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": avg, "okay": "unchecked"},
        "errors": [],
        "end_time": "2026-11-29 10:00:05",
    }  # fmt: skip
    return json.dumps(doc)
