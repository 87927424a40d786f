"""Expert-load tables of the scale store (migration 0013): one SGLang recording of Kimi-K2.5
per ``expert-load`` run, as ``python -m collectors expert-load`` stores it.

61 layers (the first dense) x 384 routed experts, top-8; each layer's tokens skewed over its
experts by a power law (a few hot experts, as real recordings show), and the busiest rank per
EP size under the two placements the collector writes: ``contiguous`` (expert // per-rank)
and ``balanced`` (here round-robin, a stand-in for EPLB's greedy packing: the rows' shape is
what the pages read, not their exact values).
"""

from __future__ import annotations

import duckdb

LAYERS, EXPERTS, TOP_K, TOKENS = 61, 384, 8, 65_536
EP_SIZES = (2, 4, 8, 16, 32, 64)
OK = "p.verb = 'expert-load' AND p.status <> 'failed'"


def insert(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO expert_load_counts (run_id, layer, expert, count) "
        "SELECT p.run_id, l.l, e.e, CASE WHEN l.l = 0 THEN 0 ELSE "
        f"  round({TOKENS * TOP_K}.0 / {EXPERTS} * 0.35 / pow((hash(p.h, l.l, e.e) % {EXPERTS}) "
        "  / 24.0 + 1, 1.1) * 3.2) END "
        f"FROM plan p, range({LAYERS}) l(l), range({EXPERTS}) e(e) WHERE {OK}"
    )  # fmt: skip
    con.execute(
        "INSERT INTO expert_load_meta SELECT p.run_id, 'moonshotai/Kimi-K2.5', 'kimi-k2.5', "
        "'preset', NULL, 'sglang', 'stat', '[\"/data/expert_distribution_recorder.pt\"]', "
        f"{LAYERS}, {EXPERTS}, {TOP_K}, 1, {LAYERS - 1}, t.total, t.spread, NULL, NULL, "
        "'http://127.0.0.1:30000', '0.5.4' FROM plan p JOIN (SELECT run_id, sum(s) AS total, "
        "  (max(s) - min(s)) / max(s) AS spread FROM (SELECT run_id, layer, sum(count) AS s "
        "  FROM expert_load_counts GROUP BY ALL HAVING s > 0) GROUP BY run_id) t USING (run_id) "
        f"WHERE {OK}"
    )  # fmt: skip
    con.execute(
        "INSERT INTO expert_load_ranks SELECT run_id, ep, placement, layer, "
        "  arg_max(rank, tokens), max(tokens), avg(tokens), max(tokens) / avg(tokens) "
        "FROM (SELECT c.run_id, s.ep, pl.placement, c.layer, "
        f"    CASE pl.placement WHEN 'contiguous' THEN c.expert // ({EXPERTS} // s.ep) "
        "    ELSE c.expert % s.ep END AS rank, sum(c.count) AS tokens "
        f"  FROM expert_load_counts c, (SELECT unnest({list(EP_SIZES)}) AS ep) s, "
        "    (SELECT unnest(['contiguous', 'balanced']) AS placement) pl "
        "  WHERE c.layer > 0 GROUP BY ALL) GROUP BY run_id, ep, placement, layer"
    )  # fmt: skip
