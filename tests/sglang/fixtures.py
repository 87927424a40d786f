"""``python -m sglang.bench_serving --output-file`` JSONL lines in the shape SGLang writes.

Keys and order from python/sglang/bench_serving.py (sgl-project/sglang 0033168f,
``benchmark()``): the arguments ``backend, dataset_name, request_rate, max_concurrency,
sharegpt_output_len, random_input_len, random_output_len, random_range_ratio``, then
``duration, completed, total_input_tokens, total_output_tokens,
total_output_tokens_retokenized, request_throughput, input_throughput, output_throughput,
{mean,median,std,p99}_e2e_latency_ms, {mean,median,std,p99}_ttft_ms, ..._tpot_ms,
{mean,median,std,p95,p99}_itl_ms, concurrency, accept_length``; ``json.dumps`` of a float
``inf`` request rate is ``Infinity``. One line per run, appended (``open(..., "a")``).
"""

from __future__ import annotations

import json
from pathlib import Path


def line(concurrency: int | None, *, tpot: float = 9.5, num_prompts: int = 64,
         input_len: int = 1024, output_len: int = 256, accept: float | None = None,
         server_info: dict | None = None) -> dict:  # fmt: skip
    """One line; with ``server_info``, in the shape of 88342607 (2025-11-03) on, which adds
    ``tag`` and the server's ``/get_server_info`` after the arguments."""
    c = concurrency or num_prompts
    ttft = 60.0 + 4.0 * c
    e2e = ttft + tpot * (output_len - 1)
    duration = num_prompts / c * e2e / 1000.0
    obj = {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
           "max_concurrency": concurrency, "sharegpt_output_len": None,
           "random_input_len": input_len, "random_output_len": output_len,
           "random_range_ratio": 1.0,
           **({"tag": None, "server_info": server_info} if server_info else {}),
           "duration": duration, "completed": num_prompts,
           "total_input_tokens": num_prompts * input_len,
           "total_output_tokens": num_prompts * output_len,
           "total_output_tokens_retokenized": num_prompts * output_len - 5,
           "request_throughput": num_prompts / duration,
           "input_throughput": num_prompts * input_len / duration,
           "output_throughput": num_prompts * output_len / duration}  # fmt: skip
    for name, mean in (("e2e_latency", e2e), ("ttft", ttft), ("tpot", tpot)):
        obj.update({f"mean_{name}_ms": mean, f"median_{name}_ms": mean * 0.98,
                    f"std_{name}_ms": mean * 0.1, f"p99_{name}_ms": mean * 1.2})  # fmt: skip
    obj.update({"mean_itl_ms": tpot, "median_itl_ms": tpot * 0.97, "std_itl_ms": tpot * 0.2,
                "p95_itl_ms": tpot * 1.1, "p99_itl_ms": tpot * 1.3,
                "concurrency": c * 0.96, "accept_length": accept})  # fmt: skip
    return obj


def write_jsonl(path: Path, levels=(1, 4, 16), **kw) -> list[dict]:
    objs = [line(c, **kw) for c in levels]
    with path.open("a") as fh:
        for o in objs:
            fh.write(json.dumps(o) + "\n")
    return objs
