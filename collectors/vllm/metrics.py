"""``vllm-metrics``: one scrape of a vLLM server's Prometheus ``/metrics`` per run.

Cheap enough for cron every minute: stdlib HTTP and parsing, no pandas/torch, no lock.
Every ``vllm:*`` sample is stored as is (gauges, counters, histogram buckets/sums/counts);
the store's views compute the deltas between consecutive scrapes that the page shows.
Metric names are vLLM's (vllm/v1/metrics/loggers.py): ``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc`` before 0.11),
``vllm:inter_token_latency_seconds`` (``vllm:time_per_output_token_seconds`` before 0.11),
``vllm:request_time_per_output_token_seconds``, ``vllm:time_to_first_token_seconds``,
``vllm:e2e_request_latency_seconds``, ``vllm:prompt_tokens_total``, ...
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import UTC, datetime

from collectors.context import Context
from collectors.errors import InputError, MeasurementError
from collectors.vllm import client, prom
from store.bundle import Bundle, new_run_id

PREFIX = "vllm:"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True,
                        help="the vLLM server, e.g. http://127.0.0.1:8000")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="HTTP timeout in seconds (default 10)")  # fmt: skip


def scrape_rows(text: str, url: str, scraped_at: str) -> dict[str, list]:
    """The vllm_metrics_samples columns for one scrape's exposition text."""
    cols: dict[str, list] = {k: [] for k in (
        "scraped_at", "url", "metric", "kind", "sample", "model_name", "engine", "labels",
        "le", "value")}  # fmt: skip
    for s in prom.parse(text, prefix=PREFIX):
        labels = dict(s.labels)
        model = labels.pop("model_name", None)
        engine = labels.pop("engine", None)
        le = labels.pop("le", None) if s.name.endswith("_bucket") else None
        cols["scraped_at"].append(scraped_at)
        cols["url"].append(url)
        cols["metric"].append(s.family)
        cols["kind"].append(s.kind)
        cols["sample"].append(s.name)
        cols["model_name"].append(model)
        cols["engine"].append(engine)
        cols["labels"].append(json.dumps(labels, sort_keys=True))
        cols["le"].append(None if le is None else float(le.replace("+Inf", "inf")))
        cols["value"].append(s.value if not math.isnan(s.value) else None)
    return cols


def run(args: argparse.Namespace, ctx: Context) -> int:
    try:
        base = client.normalize_base(args.url)
    except ValueError as exc:
        raise InputError(f"--url: {exc}") from None
    scraped_at = datetime.now(UTC).isoformat(timespec="microseconds")
    try:
        _, raw = client.request(f"{base}/metrics", timeout=args.timeout)
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"vLLM server down? {exc}") from None
    except client.HttpStatus as exc:
        raise MeasurementError(f"{exc}; is {base} a vLLM server?") from None
    try:
        cols = scrape_rows(raw.decode("utf-8", errors="replace"), base, scraped_at)
    except prom.ExpositionError as exc:
        raise MeasurementError(f"{base}/metrics is not Prometheus text: {exc}") from None
    if not cols["metric"]:
        raise MeasurementError(f"{base}/metrics has no vllm:* metrics: not a vLLM server, or one "
                               "started with --disable-log-stats")  # fmt: skip
    keep = [i for i, v in enumerate(cols["value"]) if v is not None]
    cols = {k: [vals[i] for i in keep] for k, vals in cols.items()}
    version = _server_version(base, args.timeout)
    from collectors import env as env_mod

    env = env_mod.snapshot()
    if version:
        env["vllm"] = version  # the server's version is what the samples describe
    record = ctx.run_record(new_run_id("vllm-metrics"), env=env, started_at=scraped_at)
    models = sorted({m for m in cols["model_name"] if m})
    gauges = _key_gauges(cols)
    summary = {"url": base, "samples": len(cols["metric"]), "models": models,
               "vllm_version": version, **gauges}  # fmt: skip
    ctx.log.info(f"scraped {len(cols['metric'])} samples from {base}/metrics "
                 f"(running {gauges['running']}, waiting {gauges['waiting']})")  # fmt: skip
    return ctx.submit(Bundle(record, {"vllm_metrics_samples": cols}), summary)


def _server_version(base: str, timeout: float) -> str | None:
    try:
        info = client.get_json(f"{base}/version", timeout=timeout)
    except (client.ServerUnreachable, client.HttpStatus):
        return None
    return str(info.get("version")) if isinstance(info, dict) and info.get("version") else None


def _key_gauges(cols: dict[str, list]) -> dict[str, float | None]:
    def total(name: str) -> float | None:
        vals = [v for s, v in zip(cols["sample"], cols["value"], strict=True) if s == name]
        return sum(vals) if vals else None

    return {"running": total("vllm:num_requests_running"),
            "waiting": total("vllm:num_requests_waiting")}  # fmt: skip
