"""One scrape of a serving engine's Prometheus ``/metrics`` per run (any engine).

Cheap enough for cron every minute: stdlib HTTP and parsing, no pandas/torch, no lock.
Every sample of the engine's families (``vllm:*``, ``sglang:*``) is stored as is in
``serving_metrics_samples`` with the adapter's ``engine``; the store's views compute the
deltas between consecutive scrapes (store/migrations/0010_serving_metrics.sql).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from collectors.core.context import Context
from collectors.core.errors import InputError, MeasurementError
from collectors.serving import client, prom
from store.spool.bundle import Bundle, new_run_id, utc_now_iso

_COLUMNS = ("engine", "scraped_at", "url", "metric", "kind", "sample", "model_name",
            "engine_index", "labels", "le", "value")  # fmt: skip


@dataclass(frozen=True)
class MetricsAdapter:
    engine: str  # vllm | sglang: names the server in messages and the env key
    verb: str
    prefix: str  # metric family prefix, e.g. "vllm:"
    running: str  # gauge of running requests
    waiting: str  # gauge of queued requests
    empty_hint: str  # why a server might expose none of them
    version: Callable[[str, float], str | None]
    index_label: str | None = None  # the label naming an engine core (vLLM's `engine`)


def add_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument("--url", required=True, help=f"the server, e.g. {example}")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="HTTP timeout in seconds (default 10)")  # fmt: skip


def scrape_rows(text: str, url: str, scraped_at: str, a: MetricsAdapter) -> dict[str, list]:
    """The serving_metrics_samples columns for one scrape's exposition text."""
    rows = []
    for s in prom.parse(text, prefix=a.prefix):
        labels = dict(s.labels)
        model = labels.pop("model_name", None)
        engine_index = labels.pop(a.index_label, None) if a.index_label else None
        le = labels.pop("le", None) if s.name.endswith("_bucket") else None
        rows.append({
            "engine": a.engine, "scraped_at": scraped_at, "url": url, "metric": s.family,
            "kind": s.kind, "sample": s.name, "model_name": model, "engine_index": engine_index,
            "labels": json.dumps(labels, sort_keys=True), "le": None if le is None else float(le),
            "value": s.value if not math.isnan(s.value) else None,
        })  # fmt: skip
    return {k: [r[k] for r in rows] for k in _COLUMNS}


def scrape(args: argparse.Namespace, ctx: Context, a: MetricsAdapter) -> int:
    try:
        base = client.normalize_base(args.url)
    except ValueError as exc:
        raise InputError(f"--url: {exc}") from None
    scraped_at = utc_now_iso()
    name = {"vllm": "vLLM", "sglang": "SGLang"}.get(a.engine, a.engine)
    try:
        _, raw = client.request(f"{base}/metrics", timeout=args.timeout)
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"{name} server down? {exc}") from None
    except client.HttpStatus as exc:
        raise MeasurementError(f"{exc}; is {base} a {name} server?") from None
    try:
        cols = scrape_rows(raw.decode("utf-8", errors="replace"), base, scraped_at, a)
    except prom.ExpositionError as exc:
        raise MeasurementError(f"{base}/metrics is not Prometheus text: {exc}") from None
    if not cols["metric"]:
        raise MeasurementError(f"{base}/metrics has no {a.prefix}* metrics: {a.empty_hint}")
    keep = [i for i, v in enumerate(cols["value"]) if v is not None]
    cols = {k: [vals[i] for i in keep] for k, vals in cols.items()}
    version = a.version(base, args.timeout)
    host, env = ctx.server_run(base)  # the server's machine (this one for a loopback URL)
    if version:
        env[a.engine] = version  # the server's version is what the samples describe
    record = ctx.run_record(new_run_id(a.verb), env=env, host=host, started_at=scraped_at)
    models = sorted({m for m in cols["model_name"] if m})
    gauges = {"running": _total(cols, a.running), "waiting": _total(cols, a.waiting)}
    summary = {"url": base, "samples": len(cols["metric"]), "models": models,
               f"{a.engine}_version": version, **gauges}  # fmt: skip
    ctx.log.info(f"scraped {len(cols['metric'])} samples from {base}/metrics "
                 f"(running {gauges['running']}, waiting {gauges['waiting']})")  # fmt: skip
    return ctx.submit(Bundle(record, {"serving_metrics_samples": cols}), summary)


def _total(cols: dict[str, list], name: str) -> float | None:
    vals = [v for s, v in zip(cols["sample"], cols["value"], strict=True) if s == name]
    return sum(vals) if vals else None
