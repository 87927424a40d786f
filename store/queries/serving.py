"""Named queries for the Serving page: benchmarks, vllm-profile runs, metric scrapes.

Every value is a bound parameter. Metric scrapes of every engine are read through the
``v_serving_*`` views (store/migrations/0010_serving_metrics.sql); interval quantiles come
from the bucket counts added between two scrapes (``v_serving_histogram_deltas``),
interpolated like Prometheus does.
"""

from __future__ import annotations

import math

import pandas as pd

from store.location import StoreLocation
from store.queries.histogram import histogram_quantile
from store.reader import query_df

_HOST = "(?::VARCHAR IS NULL OR host = ?)"
# "vLLM 0.11.0" / "SGLang 0.5.4": which engine (and version) produced a result.
_ENGINE = ("CASE coalesce(engine, 'vllm') WHEN 'sglang' THEN 'SGLang' WHEN 'vllm' THEN 'vLLM' "
           "ELSE engine END || coalesce(' ' || engine_version, '')")  # fmt: skip


def bench_runs(
    loc: StoreLocation, host: str | None = None, model: str | None = None
) -> pd.DataFrame:
    """One row per bench run (any engine): id, label, host, when, engines ("vllm 0.11.0"),
    models, layouts, concurrencies."""
    return query_df(
        loc,
        "SELECT run_id, any_value(label) AS label, any_value(host) AS host, "
        "string_agg(DISTINCT coalesce(engine, 'vllm') || coalesce(' ' || engine_version, ''), "
        "', ') AS engines, "
        "max(finished_at) AS finished_at, string_agg(DISTINCT model_id, ', ') AS models, "
        "string_agg(DISTINCT coalesce(layout, '?'), ', ') AS layouts, "
        "count(*) AS results, min(concurrency) AS min_concurrency, "
        "max(concurrency) AS max_concurrency FROM v_serving_bench "
        f"WHERE {_HOST} AND (?::VARCHAR IS NULL OR model_id = ?) "
        "GROUP BY run_id ORDER BY finished_at DESC, run_id DESC",
        [host, host, model, model],
    )


def bench_models(loc: StoreLocation, host: str | None = None) -> list[str]:
    frame = query_df(
        loc,
        f"SELECT DISTINCT model_id FROM v_serving_bench WHERE {_HOST} AND model_id IS NOT NULL "
        "ORDER BY model_id",
        [host, host],
    )
    return frame["model_id"].tolist()


def bench_results(loc: StoreLocation, run_ids: list[str], model: str | None = None) -> pd.DataFrame:
    """Benchmark rows of the given runs (one per concurrency x result), ordered for plotting;
    ``engine_label`` names the engine and version ("SGLang 0.5.4")."""
    if not run_ids:
        return query_df(loc, "SELECT * FROM v_serving_bench WHERE false")
    return query_df(
        loc,
        f"SELECT *, coalesce(layout, 'layout unknown') AS layout_label, {_ENGINE} AS engine_label "
        "FROM v_serving_bench "
        "WHERE list_contains(string_split(?, ','), run_id) AND (?::VARCHAR IS NULL OR model_id = ?) "
        "ORDER BY layout_label, run_id, concurrency",
        [",".join(run_ids), model, model],  # a string: cache keys must be hashable
    )


def bench_server_args(loc: StoreLocation, run_ids: list[str]) -> dict[str, str]:
    """The server command line (``--server-args``, redacted) each bench run recorded with its
    arguments, by run id; runs that recorded none are left out."""
    if not run_ids:
        return {}
    frame = query_df(
        loc,
        "SELECT run_id, json_extract_string(args, '$.server_args') AS server_args FROM runs "
        "WHERE list_contains(string_split(?, ','), run_id)",
        [",".join(sorted(run_ids))],  # a string: cache keys must be hashable
    )
    return {r: a for r, a in zip(frame["run_id"], frame["server_args"], strict=True)
            if isinstance(a, str) and a}  # fmt: skip


def profile_runs(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """vllm-profile runs: the server's facts and the client-side load summary."""
    return query_df(
        loc,
        "SELECT s.run_id, s.host, s.finished_at, s.status, s.message, s.model_id, "
        "s.vllm_version, s.layout, s.layout_kind, s.trace_files, s.flush_wait_s, "
        "s.num_requests, s.concurrency, l.completed, l.median_ttft_ms, l.median_tpot_ms, "
        "l.p99_tpot_ms, l.mean_itl_ms FROM v_vllm_servers s "
        "LEFT JOIN v_vllm_load_summary l USING (run_id) "
        f"WHERE {_HOST.replace('host', 's.host')} ORDER BY s.finished_at DESC, s.run_id DESC",
        [host, host],
    )


# Per engine, the per-token latency histograms the page shows interval quantiles of, in the
# order preferred (older family names after), each with what it measures.
PER_TOKEN_HISTOGRAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm": (("vllm:request_time_per_output_token_seconds", "TPOT"),
             ("vllm:inter_token_latency_seconds", "ITL"),
             ("vllm:time_per_output_token_seconds", "ITL")),  # before 0.11: per token
    "sglang": (("sglang:inter_token_latency_seconds", "ITL"),
               ("sglang:time_per_output_token_seconds", "ITL")),  # older name, per token
}  # fmt: skip


def _label_value(value: object) -> str | None:
    """A label read back from a frame: pandas gives NaN for NULL, which would bind as DOUBLE
    and make DuckDB cast the VARCHAR column to it (issue 20: SGLang's model_name)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def metric_servers(loc: StoreLocation, host: str | None = None) -> pd.DataFrame:
    """Each scraped server (engine, host, url, model) with its scrape count and time range."""
    return query_df(
        loc,
        "SELECT engine, host, url, model_name, count(*) AS scrapes, min(scraped_at) AS first_at, "
        f"max(scraped_at) AS last_at FROM v_serving_scrapes WHERE {_HOST} "
        "GROUP BY engine, host, url, model_name ORDER BY last_at DESC, engine, url, model_name",
        [host, host],
    )


def metrics_timeline(loc: StoreLocation, host: str, url: str, model: str | None,
                     since: object, engine: str = "vllm") -> pd.DataFrame:  # fmt: skip
    """Per scrape: gauges and the interval rates/latencies since the previous scrape."""
    return query_df(
        loc,
        "SELECT * FROM v_serving_metrics_deltas WHERE engine = ? AND host = ? AND url = ? "
        "AND model_name IS NOT DISTINCT FROM ?::VARCHAR AND scraped_at >= ? ORDER BY scraped_at",
        [engine, host, url, _label_value(model), since],
    )


def per_token_histogram(loc: StoreLocation, engine: str, host: str, url: str,
                        model: str | None) -> tuple[str, str] | None:  # fmt: skip
    """(family, "TPOT" | "ITL") of the first per-token histogram this server exports."""
    candidates = PER_TOKEN_HISTOGRAMS.get(engine, ())
    if not candidates:
        return None
    found = set(query_df(
        loc,
        "SELECT DISTINCT metric FROM v_serving_histogram_deltas WHERE engine = ? AND host = ? "
        "AND url = ? AND model_name IS NOT DISTINCT FROM ?::VARCHAR "
        "AND list_contains(string_split(?, ','), metric)",
        [engine, host, url, _label_value(model), ",".join(m for m, _ in candidates)],
    )["metric"])  # fmt: skip
    return next(((m, what) for m, what in candidates if m in found), None)


def interval_quantiles(loc: StoreLocation, host: str, url: str, model: str | None, metric: str,
                       since: object, qs: tuple[float, ...] = (0.5, 0.99)) -> pd.DataFrame:  # fmt: skip
    """Per scrape, quantiles (ms) of ``metric`` over the observations since the last scrape
    (none for a server's first scrape: nothing to subtract)."""
    frame = query_df(
        loc,
        "SELECT run_id, scraped_at, le, added FROM v_serving_histogram_deltas WHERE host = ? "
        "AND url = ? AND model_name IS NOT DISTINCT FROM ?::VARCHAR AND metric = ? "
        "AND scraped_at >= ? AND added IS NOT NULL ORDER BY scraped_at, le",
        [host, url, _label_value(model), metric, since],
    )
    rows = []
    for (run_id, at), part in frame.groupby(["run_id", "scraped_at"], sort=True):
        buckets = [(float("inf") if math.isinf(le) else float(le), float(n))
                   for le, n in zip(part["le"], part["added"], strict=True)]  # fmt: skip
        row = {"run_id": run_id, "scraped_at": at, "observations": buckets[-1][1] if buckets else 0}
        for q in qs:
            v = histogram_quantile(q, buckets)
            row[f"p{round(q * 100)}_ms"] = None if v is None else v * 1000.0
        rows.append(row)
    columns = ["run_id", "scraped_at", "observations", *[f"p{round(q * 100)}_ms" for q in qs]]
    out = pd.DataFrame(rows, columns=columns).astype(
        {"scraped_at": frame["scraped_at"].dtype, "observations": float,
         **{c: float for c in columns[3:]}})  # typed when empty too: callers merge on it
    return out.sort_values("scraped_at", ignore_index=True)
