"""Named queries for the Collectives page (comm benchmarks and nccl-tests imports)."""

from __future__ import annotations

import pandas as pd

from store.location import StoreLocation
from store.reader import query_df


def comm_runs(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """One row per collective run (newest first): where, what, and which ops it holds."""
    return query_df(
        loc,
        "SELECT r.run_id, r.host, r.label, r.finished_at, r.verb, m.source, m.backend, "
        "m.world_size, m.device, m.interconnect, m.graph_mode, m.gpu_names, m.nccl_version, "
        "m.file, m.avg_busbw_gbps, m.footer_avg_busbw_gbps, "
        "(SELECT string_agg(DISTINCT c.op, ',' ORDER BY c.op) FROM comm_results c "
        " WHERE c.run_id = r.run_id) AS ops, "
        "(SELECT count(*) FROM comm_results c WHERE c.run_id = r.run_id) AS points "
        "FROM runs r JOIN comm_meta m ON m.run_id = r.run_id "
        "WHERE (?::VARCHAR IS NULL OR r.host = ?) "
        "ORDER BY r.finished_at DESC, r.run_id DESC",
        [host, host],
    )


def comm_results(loc: StoreLocation, run_ids: list[str]) -> pd.DataFrame:
    """Every measured point of the given runs (v_comm_results), smallest size first.

    nccl-tests rows come in out-of-place and in-place halves; ``primary`` marks the half a
    curve uses: out-of-place where the run has it (nccl-tests' first half), else in-place
    (comm's all_reduce runs in place, as engines call it).
    """
    if not run_ids:
        return query_df(loc, "SELECT *, true AS primary FROM v_comm_results WHERE false")
    return query_df(
        loc,
        "SELECT v.*, (NOT v.in_place OR NOT EXISTS (SELECT 1 FROM comm_results o "
        "  WHERE o.run_id = v.run_id AND o.op = v.op AND o.bytes = v.bytes "
        "  AND o.dtype IS NOT DISTINCT FROM v.dtype AND NOT o.in_place)) AS primary "
        "FROM v_comm_results v WHERE list_contains(string_split(?, chr(31)), v.run_id) "
        "ORDER BY v.run_id, v.op, v.bytes, v.in_place",
        ["\x1f".join(run_ids)],  # one bound string (the result cache keys on hashable params)
    )
