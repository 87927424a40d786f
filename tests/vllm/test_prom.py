"""The Prometheus text parser and interval quantiles, on text in prometheus_client's format."""

from __future__ import annotations

import math

import pytest

from collectors.serving import prom
from collectors.serving.metrics import scrape_rows
from collectors.serving.vllm.metrics import ADAPTER
from store.queries.histogram import histogram_quantile

# As prometheus_client.generate_latest writes vLLM's metrics (vllm/v1/metrics/loggers.py),
# with two engines (data-parallel) and an escaped quote in a label value.
TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Kimi \\"K2.5\\""} 3.0
vllm:num_requests_running{engine="1",model_name="Kimi \\"K2.5\\""} 2.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 10.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025",model_name="m"} 30.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 40.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 40.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.8
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
process_start_time_seconds 1.7e+09 1700000000000
"""


def test_parse_keeps_types_labels_and_drops_created() -> None:
    samples = prom.parse(TEXT, prefix="vllm:")
    names = [s.name for s in samples]
    assert "vllm:generation_tokens_created" not in names
    assert not any(n.startswith("python_") for n in names)
    running = [s for s in samples if s.name == "vllm:num_requests_running"]
    assert [s.labels["model_name"] for s in running] == ['Kimi "K2.5"'] * 2
    assert sum(s.value for s in running) == 5.0
    bucket = next(s for s in samples if s.name.endswith("_bucket") and s.labels["le"] == "+Inf")
    assert (bucket.family, bucket.kind) == ("vllm:inter_token_latency_seconds", "histogram")
    counter = next(s for s in samples if s.name == "vllm:generation_tokens_total")
    assert counter.kind == "counter" and counter.value == 1234.0
    everything = prom.parse(TEXT)
    assert next(s for s in everything if s.name == "process_start_time_seconds").value == 1.7e9


@pytest.mark.parametrize(("written", "value"), [
    (r'x\"y', 'x"y'), (r"a\nb", "a\nb"), (r"C:\\n", "C:\\n"), (r"x\\\"y", 'x\\"y'),
    (r"tab\t", "tab\\t"), ("ünï", "ünï"),
], ids=["quote", "newline", "backslash-then-n", "backslash-then-quote", "other", "utf-8"])
def test_label_value_escapes(written: str, value: str) -> None:
    (sample,) = prom.parse(f'm{{a="{written}"}} 1\n')
    assert sample.labels["a"] == value


def test_scrape_rows_split_labels_and_buckets() -> None:
    cols = scrape_rows(TEXT, "http://h:8000", "2026-11-30T00:00:00+00:00", ADAPTER)
    les = [le for le, s in zip(cols["le"], cols["sample"], strict=True) if s.endswith("_bucket")]
    assert les == [0.01, 0.025, math.inf]
    assert set(cols["engine_index"]) == {"0", "1"}  # vLLM's engine label: the DP engine core
    assert set(cols["engine"]) == {"vllm"}  # the server scraped
    assert all(lab == "{}" for lab in cols["labels"])


def test_bad_exposition_is_rejected() -> None:
    with pytest.raises(prom.ExpositionError, match="line 1"):
        prom.parse('vllm:x{engine="0" 1.0\n')
    with pytest.raises(prom.ExpositionError, match="bad value"):
        prom.parse("vllm:x{} notanumber\n")


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.01, 10.0), (0.025, 30.0), (math.inf, 40.0)]
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.01)
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.0175)
    assert histogram_quantile(0.99, buckets) == 0.025  # falls in +Inf: last finite bound
    assert histogram_quantile(0.5, [(0.01, 0.0), (math.inf, 0.0)]) is None
