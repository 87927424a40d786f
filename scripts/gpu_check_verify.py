"""Judge one ``scripts/gpu-check.sh`` check from what its command left behind.

``python scripts/gpu_check_verify.py CHECK OUT_JSON STORE [ARG]`` prints one line (why) and
exits 0 (PASS) or 1 (FAIL). OUT_JSON is the collector's ``--json`` summary on stdout.
Reading the store needs only duckdb, so this runs wherever the collectors do.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

# Real CUDA kernel names and the categories the trace taxonomy may give them (the first is
# the expected one). A GEMM launched inside the MoE op may be filed under moe;
# flash-attention kernels are CUTLASS too, so attention-like names are not GEMM evidence.
KERNEL_EXPECTATIONS = (
    (re.compile(r"nccl.*AllReduce", re.I), ("allreduce",)),
    (re.compile(r"nccl.*AllGather", re.I), ("allgather",)),
    (re.compile(r"^(?!.*(flash|fmha|attn|attention)).*((?<!fb)gemm|nvjet|xmma)", re.I),
     ("gemm", "moe")),
)


class Fail(Exception):
    pass


def _rows(store: str, sql: str, params: list[Any]) -> list[tuple]:
    import duckdb

    con = duckdb.connect(store, read_only=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def check_gpu(out: dict, store: str, _arg: str) -> str:
    if not out.get("gpu_count"):
        raise Fail(f"NVML found no GPU ({out})")
    rows = _rows(store, "SELECT count(*), count(numa_node), max(pcie_gen_max) FROM v_gpu_devices "
                 "WHERE run_id = ?", [out["run_id"]])  # fmt: skip
    msg = _rows(store, "SELECT message FROM v_gpu_host WHERE run_id = ?", [out["run_id"]])
    note = (msg[0][0] if msg else None) or ""
    if "NumaNodeId" in note:
        raise Fail(f"the gpu run still warns about nvmlDeviceGetNumaNodeId: {note}")
    return (f"{out['gpu_count']}x {out['gpu_model']}, {out['interconnect']}; "
            f"numa_node known for {rows[0][1]}/{rows[0][0]}, PCIe gen max {rows[0][2]}"
            + (f"; note: {note}" if note else ""))  # fmt: skip


def check_comm(out: dict, store: str, arg: str) -> str:
    """``arg``: ``eager``, ``graph`` or ``default`` (graph expected), then ``:N`` ranks,
    then ``:I,J`` the NVML indices the ranks must have used."""
    mode, n, expect = (arg.split(":") + ["", ""])[:3]
    want_graph = mode != "eager"
    if bool(out.get("graph_mode")) != want_graph:
        raise Fail(f"graph_mode is {out.get('graph_mode')}, expected {want_graph}")
    rows = _rows(store, "SELECT op, bytes, p50_us, burst_us, wrong, gpus_used, interconnect "
                 "FROM v_comm_results WHERE run_id = ? ORDER BY op, bytes", [out["run_id"]])  # fmt: skip
    if not rows:
        raise Fail("no rows committed")
    bad = [r for r in rows if r[4] or not r[2] or not r[3] or r[2] <= 0 or r[3] <= 0]
    if bad:
        raise Fail(f"{len(bad)} row(s) wrong or without times: {bad[:3]}")
    used = rows[0][5] or ""
    if n and len(set(used.split(","))) != int(n):
        raise Fail(f"ranks used GPUs {used!r}, expected {n} distinct (LOCAL_RANK/device binding)")
    if expect and used != expect:
        raise Fail(f"ranks used NVML GPUs {used!r}, CUDA_VISIBLE_DEVICES named {expect!r}")
    if rows[0][6] == "unknown":
        raise Fail("interconnect of the used GPUs is unknown")
    small = min(rows, key=lambda r: r[1])
    return (f"{len(rows)} points, {out['world_size']} rank(s) on GPUs {used or '?'} "
            f"({rows[0][6]}); smallest {small[0]} {small[1]} B: p50 {small[2]:.1f} us, "
            f"nccl-tests-style {small[3]:.1f} us")


def check_trace(out: dict, store: str, arg: str) -> str:
    """``arg``: categories that must be present, comma separated."""
    rows = _rows(store, "SELECT DISTINCT name, category FROM v_trace_kernel_stats "
                 "WHERE run_id = ?", [out["run_id"]])  # fmt: skip
    if not rows:
        raise Fail("no kernels in the ingested CUDA trace")
    wrong, seen = [], {category for _, category in rows}
    for name, category in rows:
        for pattern, allowed in KERNEL_EXPECTATIONS:
            if pattern.search(name or ""):
                if category not in allowed:
                    wrong.append(f"{name[:60]} -> {category} (expected {allowed[0]})")
                break
    if wrong:
        raise Fail("; ".join(wrong[:5]))
    missing = [c for c in arg.split(",") if c and c not in seen]
    if missing:
        raise Fail(f"no kernel classified {', '.join(missing)} among {len(rows)} kernel names")
    return f"{len(rows)} kernel names; categories {', '.join(sorted(c for c in seen if c))}"


def check_profile(out: dict, _store: str, arg: str) -> str:
    cats = out.get("categories") or {}
    missing = [c for c in arg.split(",") if c and not cats.get(c, {}).get("calls")]
    if missing or out.get("device") != "cuda":
        raise Fail(f"device {out.get('device')}, categories missing: {missing} ({sorted(cats)})")
    return f"tp {out['tp']} on cuda, {out['steps']} steps, categories {', '.join(sorted(cats))}"


def check_doctor(out: dict, _store: str, _arg: str) -> str:
    if not out.get("ok"):
        failed = [c for c in out.get("checks", []) if c["status"] == "FAIL"]
        raise Fail(f"doctor failed: {failed}")
    nv = [c for c in out.get("checks", []) if c["name"] == "nvml"]
    return nv[0]["detail"] if nv else "ok"


def check_floor(out: dict, _store: str, _arg: str) -> str:
    """A real CUDA step against its floors (docs/floors.md): the trace's GPU and the run's
    model resolved, and no category faster than its floor (within 20%: the floors use spec
    peaks, and a category measured below one means a floor's bytes or FLOPs are wrong)."""
    unresolved = [m for m in out.get("missing", []) if m.startswith(("host:", "model:"))]
    if unresolved:
        raise Fail("; ".join(unresolved)[:300])
    cats = {k: v for k, v in (out.get("categories") or {}).items()
            if v.get("floor_us_per_step") is not None}  # fmt: skip
    if not cats:
        raise Fail("no category got a floor")
    below = [f"{k} {v['measured_us_per_step']:.1f} us < floor {v['floor_us_per_step']:.1f} us"
             for k, v in cats.items()
             if v["measured_us_per_step"] < 0.8 * v["floor_us_per_step"]]  # fmt: skip
    if below:
        raise Fail("measured below the floor: " + "; ".join(below[:4]))
    ratio = {k: v["measured_us_per_step"] / max(v["floor_us_per_step"], 1e-9)
             for k, v in cats.items()}  # fmt: skip
    shown = ", ".join(f"{k} {r:.1f}x" for k, r in sorted(ratio.items(), key=lambda x: -x[1]))
    return f"{len(ratio)} categories at or above their floors: {shown}"


CHECKS = {"gpu": check_gpu, "comm": check_comm, "trace": check_trace, "floor": check_floor,
          "profile": check_profile, "doctor": check_doctor}  # fmt: skip


def main(argv: list[str]) -> int:
    check, out_path, store = argv[0], Path(argv[1]), argv[2]
    arg = argv[3] if len(argv) > 3 else ""
    try:
        lines = [ln for ln in out_path.read_text().splitlines() if ln.startswith("{")]
        if not lines:
            raise Fail(f"no --json summary on stdout ({out_path})")
        print(CHECKS[check](json.loads(lines[-1]), store, arg))
        return 0
    except Fail as exc:
        print(str(exc))
        return 1
    except Exception as exc:  # noqa: BLE001 - a check that cannot be judged is a FAIL line
        print(f"could not verify: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
