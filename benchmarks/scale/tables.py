"""The scale store's other tables (host, gpu, comm, nccl-tests, serving), one INSERT each.

Every statement reads the TEMP ``plan`` table (benchmarks/scale/runs.py) and ``range()``;
failed runs get no rows, as a failed collector commits none.
"""

from __future__ import annotations

import duckdb

from benchmarks.scale.catalog import HOST_CLASSES

OK = "p.status <> 'failed'"
_CLASSES = "[" + ", ".join(f"'{hc.interconnect}'" for hc in HOST_CLASSES) + "]"
_NVLINKS = "[" + ", ".join(str(hc.nvlinks) for hc in HOST_CLASSES) + "]"


def _models() -> list[str]:
    return [hc.gpu_model for hc in HOST_CLASSES]


def insert_host_and_gpu(con: duckdb.DuckDBPyConnection) -> None:
    mem = [hc.memory_bytes for hc in HOST_CLASSES]
    con.execute(
        "INSERT INTO host_gpus SELECT p.run_id, g.i, list_extract(?::VARCHAR[], p.hclass + 1), "
        "'GPU-' || substr(md5(p.host || g.i), 1, 8) || '-' || substr(md5(g.i || p.host), 1, 4), "
        "list_extract(?::BIGINT[], p.hclass + 1), printf('00000000:%02X:00.0', 24 + g.i * 16) "
        f"FROM plan p, range(8) g(i) WHERE p.verb = 'host' AND {OK}",
        [_models(), mem],
    )  # fmt: skip
    con.execute(
        "INSERT INTO gpu_host SELECT p.run_id, true, '580.95.05', '13.0', 8, "
        f"list_extract(?::VARCHAR[], p.hclass + 1), list_extract({_CLASSES}, p.hclass + 1), NULL "
        f"FROM plan p WHERE p.verb = 'gpu' AND {OK}",
        [_models()],
    )  # fmt: skip
    con.execute(
        "INSERT INTO gpu_devices SELECT p.run_id, g.i, list_extract(?::VARCHAR[], p.hclass + 1), "
        "'GPU-' || substr(md5(p.host || g.i), 1, 8) || '-' || substr(md5(g.i || p.host), 1, 4), "
        "list_extract(?::BIGINT[], p.hclass + 1), printf('00000000:%02X:00.0', 24 + g.i * 16), "
        "CASE WHEN g.i % 3 = 0 THEN 1 ELSE 5 END, 5, 16, 16, "
        f"list_extract({_NVLINKS}, p.hclass + 1), 600.0, 2430, 12481, 5120, "
        "list_extract(?::DOUBLE[], p.hclass + 1), g.i // 4, "
        "CASE WHEN g.i < 4 THEN '0-63,128-191' ELSE '64-127,192-255' END, "
        "false, 0 "  # mig_enabled, mig_devices (0009)
        f"FROM plan p, range(8) g(i) WHERE p.verb = 'gpu' AND {OK}",
        [_models(), mem, [hc.mem_bw_gbps for hc in HOST_CLASSES]],
    )  # fmt: skip
    con.execute(
        "INSERT INTO gpu_links SELECT p.run_id, a.i, b.j, "
        "CASE WHEN a.i = b.j THEN 'X' WHEN p.hclass >= 2 THEN 'NV18' "
        "  WHEN a.i // 4 = b.j // 4 THEN 'NODE' ELSE 'SYS' END, "
        "CASE WHEN a.i = b.j THEN 'X' ELSE 'OK' END, CASE WHEN a.i = b.j THEN 'X' ELSE 'OK' END, "
        "CASE WHEN a.i = b.j THEN 'X' WHEN p.hclass >= 2 THEN 'OK' ELSE 'NS' END, "
        "CASE WHEN a.i = b.j THEN 'X' WHEN p.hclass >= 2 THEN 'OK' ELSE 'NS' END "
        f"FROM plan p, range(8) a(i), range(8) b(j) WHERE p.verb = 'gpu' AND {OK}"
    )  # fmt: skip
    con.execute(
        "INSERT INTO gpu_nvlinks SELECT p.run_id, g.i, l.k, true, 4, "
        "printf('00000000:%02X:00.0', 160 + l.k % 4), 'switch' "
        f"FROM plan p, range(8) g(i), range(18) l(k) WHERE p.verb = 'gpu' AND {OK} "
        "AND p.hclass >= 2"
    )  # fmt: skip


def insert_comm(con: duckdb.DuckDBPyConnection) -> None:
    """``comm`` sweeps (4 ops x 10 token counts, all_reduce both in and out of place) and
    nccl-tests imports (one op, 8 B .. 8 GiB, out-of-place then in-place)."""
    con.execute(
        "INSERT INTO comm_meta SELECT p.run_id, "
        "CASE p.verb WHEN 'comm' THEN 'comm' ELSE 'nccl-tests' END, 'nccl', 8, 'cuda', "
        "p.verb = 'nccl-tests' AND p.idx % 2 = 0, '2.27.7', '{\"NCCL_P2P_LEVEL\": \"SYS\"}', "
        f"list_extract({_CLASSES}, p.hclass + 1), list_extract(?::VARCHAR[], p.hclass + 1), "
        "CASE WHEN p.verb = 'nccl-tests' THEN '/data/nccl/' || p.run_id || '.log' END, "
        "CASE WHEN p.verb = 'nccl-tests' THEN '2.17.6' END, "
        "CASE WHEN p.hclass >= 2 THEN 310.0 ELSE 31.0 END + (p.h % 100) / 10.0, "
        "CASE WHEN p.verb = 'nccl-tests' THEN "
        "  CASE WHEN p.hclass >= 2 THEN 310.0 ELSE 31.0 END + (p.h % 100) / 10.0 END, "
        # gpus_used, timing, pcie_gen_loaded, pcie_width_loaded (0009); imports have none
        "CASE WHEN p.verb = 'comm' THEN '0,1,2,3,4,5,6,7' END, "
        "CASE WHEN p.verb = 'comm' THEN 'cuda events after a pre-roll, cuda-graph replays' END, "
        "CASE WHEN p.verb = 'comm' THEN 5 END, CASE WHEN p.verb = 'comm' THEN 16 END "
        f"FROM plan p WHERE p.verb IN ('comm', 'nccl-tests') AND {OK}",
        [_models()],
    )  # fmt: skip
    # Latency = alpha + bytes / bw: PCIe hosts ~25 us and ~30 GB/s busbw, NVLink ~12 us.
    lat = ("(CASE WHEN p.hclass >= 2 THEN 12.0 ELSE 25.0 END + b / "
           "(CASE WHEN p.hclass >= 2 THEN 300000.0 ELSE 30000.0 END))")  # fmt: skip
    con.execute(
        "INSERT INTO comm_results SELECT run_id, op, 'bf16', tok, 7168, b, b // 2, ip, 50, "
        "lat, lat * 0.95, lat * 1.1, lat * 0.9, lat * 1.02, b / lat / 1000.0, "
        "b / lat / 1000.0 * CASE op WHEN 'all_reduce' THEN 1.75 ELSE 0.875 END, 0, "
        # nccl-tests' figure (burst mean over ranks, 0009): a little under the per-call p50
        "lat * 0.97, b / (lat * 0.97) / 1000.0, "
        "b / (lat * 0.97) / 1000.0 * CASE op WHEN 'all_reduce' THEN 1.75 ELSE 0.875 END FROM ("
        "SELECT p.run_id, o.op, t.tok, t.tok * 14336 AS b, ip.v AS ip, "
        f"{lat.replace('b /', '(t.tok * 14336) /')} AS lat "
        "FROM plan p, (VALUES ('all_reduce'), ('all_to_all'), ('all_gather'), "
        "('reduce_scatter')) o(op), (SELECT unnest([1, 2, 4, 8, 16, 32, 64, 128, 256, 512]) "
        "AS tok) t, (VALUES (true), (false)) ip(v) "
        f"WHERE p.verb = 'comm' AND {OK} AND (ip.v OR o.op = 'all_reduce'))"
    )  # fmt: skip
    con.execute(
        "INSERT INTO comm_results SELECT run_id, op, 'bf16', NULL, NULL, b, b // 2, ip, 20, "
        "lat, NULL, NULL, NULL, NULL, b / lat / 1000.0, b / lat / 1000.0 * 1.75, 0, "
        "NULL, NULL, NULL FROM ("  # an import's one time is already nccl-tests' figure
        "SELECT p.run_id, list_extract(['all_reduce', 'all_gather', 'alltoall', "
        "'reduce_scatter'], p.idx % 4 + 1) AS op, (8 * pow(2, s.k))::BIGINT AS b, ip.v AS ip, "
        f"{lat.replace('b /', '(8 * pow(2, s.k)) /')} AS lat "
        "FROM plan p, range(31) s(k), (VALUES (false), (true)) ip(v) "
        f"WHERE p.verb = 'nccl-tests' AND {OK})"
    )  # fmt: skip
