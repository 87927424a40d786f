"""``vllm-metrics``: one scrape of a vLLM server's Prometheus ``/metrics`` per run.

The scrape is collectors/serving/metrics.py; this adapter names vLLM's families
(vllm/v1/metrics/loggers.py): ``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``
(``vllm:gpu_cache_usage_perc`` before 0.11), ``vllm:inter_token_latency_seconds``
(``vllm:time_per_output_token_seconds`` before 0.11),
``vllm:request_time_per_output_token_seconds``, ``vllm:time_to_first_token_seconds``,
``vllm:e2e_request_latency_seconds``, ``vllm:prompt_tokens_total``, ...
"""

from __future__ import annotations

import argparse

from collectors.core.context import Context
from collectors.serving import client
from collectors.serving import metrics as serving_metrics


def _server_version(base: str, timeout: float) -> str | None:
    try:
        info = client.get_json(f"{base}/version", timeout=timeout)
    except (client.ServerUnreachable, client.HttpStatus):
        return None
    return str(info.get("version")) if isinstance(info, dict) and info.get("version") else None


ADAPTER = serving_metrics.MetricsAdapter(
    engine="vllm", verb="vllm-metrics", prefix="vllm:", running="vllm:num_requests_running",
    waiting="vllm:num_requests_waiting", version=_server_version, index_label="engine",
    empty_hint="not a vLLM server, or one started with --disable-log-stats",
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    serving_metrics.add_arguments(parser, "http://127.0.0.1:8000")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return serving_metrics.scrape(args, ctx, ADAPTER)
