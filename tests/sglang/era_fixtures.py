"""``sglang.bench_serving --output-file`` lines of every era, as ``json.dumps`` wrote them.

Each key list is the ``result`` dict of ``benchmark()`` in python/sglang/bench_serving.py at
the commit named (sgl-project/sglang history, collectors/sglang/result_keys.py); key order
as there, bare ``Infinity`` for ``--request-rate inf`` and ``null`` for an unset option.
The numbers are of one plausible run (64 prompts, 1024 in / 256 out, concurrency 16).
"""

from __future__ import annotations

# 4b4a67f8 (2024-07-20), 8 keys: "median_itl" holds metrics.mean_itl_ms.
JULY_20_2024 = (
    '{"dataset_name": "random", "request_rate": Infinity, "median_ttft": 182.5, '
    '"median_itl": 11.2, "output_token_throughput": 1310.4, "sharegpt_output_len": null, '
    '"random_input_len": 1024, "random_output_len": 256}'
)

# fa7ccb33 (2024-07-24), 16 keys: e2e latency added, "median_itl" now the median.
JULY_24_2024 = (
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"total_input": 65536, "total_output": 16384, "total_output_retokenized": 16379, '
    '"mean_e2e_latency": 3050.2, "median_e2e_latency": 2990.7, "median_ttft": 182.5, '
    '"median_itl": 10.9, "output_token_throughput": 1310.4, "sharegpt_output_len": null, '
    '"random_input_len": 1024, "random_output_len": 256, "random_range_ratio": 1.0, '
    '"benchmark_duration": 12.5}'
)

# 41598e0d (2024-08-12), 17 keys: the *_ms and *_tokens names.
AUGUST_2024 = (
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"total_input_tokens": 65536, "total_output_tokens": 16384, '
    '"total_output_tokens_retokenized": 16379, "mean_e2e_latency_ms": 3050.2, '
    '"median_e2e_latency_ms": 2990.7, "median_ttft_ms": 182.5, "median_itl_ms": 10.9, '
    '"output_throughput": 1310.4, "sharegpt_output_len": null, "random_input_len": 1024, '
    '"random_output_len": 256, "random_range_ratio": 1.0, "duration": 12.5, "completed": 64}'
)

# 60769be1 (2024-11-23), 18 keys: + max_concurrency (the late-2024 file of issue 20).
NOVEMBER_2024 = (
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"max_concurrency": null, "total_input_tokens": 65536, "total_output_tokens": 16384, '
    '"total_output_tokens_retokenized": 16379, "mean_e2e_latency_ms": 3050.2, '
    '"median_e2e_latency_ms": 2990.7, "median_ttft_ms": 182.5, "median_itl_ms": 10.9, '
    '"output_throughput": 1310.4, "sharegpt_output_len": null, "random_input_len": 1024, '
    '"random_output_len": 256, "random_range_ratio": 1.0, "duration": 12.5, "completed": 64}'
)
NOVEMBER_2024_C16 = NOVEMBER_2024.replace('"max_concurrency": null', '"max_concurrency": 16')

# bdc1acf6 (2025-01-07), 21 keys: + mean_ttft_ms, mean_itl_ms, input_throughput.
JANUARY_7_2025 = (
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"max_concurrency": 16, "total_input_tokens": 65536, "total_output_tokens": 16384, '
    '"total_output_tokens_retokenized": 16379, "mean_e2e_latency_ms": 3050.2, '
    '"median_e2e_latency_ms": 2990.7, "mean_ttft_ms": 190.1, "median_ttft_ms": 182.5, '
    '"mean_itl_ms": 11.2, "median_itl_ms": 10.9, "input_throughput": 5242.9, '
    '"output_throughput": 1310.4, "sharegpt_output_len": null, "random_input_len": 1024, '
    '"random_output_len": 256, "random_range_ratio": 1.0, "duration": 12.5, "completed": 64}'
)

# 8f157893 (2025-01-10), 31 keys: std and p99 of each, TPOT; a NaN std (one request).
JANUARY_10_2025 = (
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"max_concurrency": 16, "total_input_tokens": 65536, "total_output_tokens": 16384, '
    '"total_output_tokens_retokenized": 16379, "mean_e2e_latency_ms": 3050.2, '
    '"median_e2e_latency_ms": 2990.7, "std_e2e_latency_ms": 120.4, '
    '"p99_e2e_latency_ms": 3301.0, "mean_ttft_ms": 190.1, "median_ttft_ms": 182.5, '
    '"std_ttft_ms": NaN, "p99_ttft_ms": 260.3, "mean_tpot_ms": 11.2, "median_tpot_ms": 11.0, '
    '"std_tpot_ms": 0.4, "p99_tpot_ms": 12.1, "mean_itl_ms": 11.2, "median_itl_ms": 10.9, '
    '"std_itl_ms": 2.1, "p99_itl_ms": 19.8, "input_throughput": 5242.9, '
    '"output_throughput": 1310.4, "sharegpt_output_len": null, "random_input_len": 1024, '
    '"random_output_len": 256, "random_range_ratio": 1.0, "duration": 12.5, "completed": 64}'
)

# 88342607 (2025-11-03), 39 keys: tag, server_info (an object), replayed "trace" timestamps.
NOVEMBER_2025 = (
    '{"tag": null, "backend": "sglang", "dataset_name": "random", "request_rate": "trace", '
    '"max_concurrency": 16, "sharegpt_output_len": null, "random_input_len": 1024, '
    '"random_output_len": 256, "random_range_ratio": 1.0, "server_info": {"tp_size": 8, '
    '"version": "0.5.5"}, "duration": 12.5, "completed": 64, "total_input_tokens": 65536, '
    '"total_input_text_tokens": 65536, "total_input_vision_tokens": 0, '
    '"total_output_tokens": 16384, "total_output_tokens_retokenized": 16379, '
    '"request_throughput": 5.12, "input_throughput": 5242.9, "output_throughput": 1310.4, '
    '"mean_e2e_latency_ms": 3050.2, "median_e2e_latency_ms": 2990.7, '
    '"std_e2e_latency_ms": 120.4, "p99_e2e_latency_ms": 3301.0, "mean_ttft_ms": 190.1, '
    '"median_ttft_ms": 182.5, "std_ttft_ms": 20.2, "p99_ttft_ms": 260.3, "mean_tpot_ms": 11.2, '
    '"median_tpot_ms": 11.0, "std_tpot_ms": 0.4, "p99_tpot_ms": 12.1, "mean_itl_ms": 11.2, '
    '"median_itl_ms": 10.9, "std_itl_ms": 2.1, "p95_itl_ms": 15.0, "p99_itl_ms": 19.8, '
    '"concurrency": 15.6, "accept_length": null}'
)

ERAS = {"4b4a67f8": JULY_20_2024, "fa7ccb33": JULY_24_2024, "41598e0d": AUGUST_2024,
        "60769be1": NOVEMBER_2024, "bdc1acf6": JANUARY_7_2025, "8f157893": JANUARY_10_2025,
        "88342607": NOVEMBER_2025}  # fmt: skip
KEY_COUNTS = {"4b4a67f8": 8, "fa7ccb33": 16, "41598e0d": 17, "60769be1": 18, "bdc1acf6": 21,
              "8f157893": 31, "88342607": 39}  # fmt: skip
