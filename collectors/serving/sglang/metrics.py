"""``sglang-metrics``: one scrape of an SGLang server's Prometheus ``/metrics`` per run.

SGLang exposes metrics with ``--enable-metrics``. Families (python/sglang/srt/metrics/
collector.py, sgl-project/sglang 00ae9c15): scheduler gauges ``sglang:num_running_reqs``,
``sglang:num_queue_reqs``, ``sglang:token_usage``, ``sglang:gen_throughput``,
``sglang:cache_hit_rate``, ``sglang:spec_accept_length``; tokenizer counters/histograms
``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
``sglang:num_requests_total``, ``sglang:time_to_first_token_seconds``,
``sglang:inter_token_latency_seconds``, ``sglang:e2e_request_latency_seconds``. Labels:
``model_name`` plus per-rank ones (``tp_rank``, ...), kept in ``labels``.
"""

from __future__ import annotations

import argparse

from collectors.core.context import Context
from collectors.serving import client
from collectors.serving import metrics as serving_metrics
from collectors.serving.sglang import server


def _version(base: str, timeout: float) -> str | None:
    try:
        v = server.server_info(base, timeout).get("version")
    except client.ServerUnreachable:
        return None
    return str(v) if v else None


ADAPTER = serving_metrics.MetricsAdapter(
    engine="sglang", verb="sglang-metrics", prefix="sglang:", running="sglang:num_running_reqs",
    waiting="sglang:num_queue_reqs", version=_version,
    empty_hint="not an SGLang server, or one started without --enable-metrics",
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    serving_metrics.add_arguments(parser, "http://127.0.0.1:30000")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return serving_metrics.scrape(args, ctx, ADAPTER)
