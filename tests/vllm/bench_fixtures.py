"""``vllm bench serve --save-result`` files in the exact shape vLLM writes them.

Shape from vllm/benchmarks/serve.py (vllm-project/vllm main, commit 009e6d4a as stored):
``main_async`` writes ``date, endpoint_type, backend, label, model_id, tokenizer_id,
num_prompts``, the ``--metadata`` pairs (string values), ``request_rate`` (``"inf"`` as a
string), ``burstiness, max_concurrency``, then merges ``benchmark()``'s result:
``duration, completed, failed, total_input_tokens, total_output_tokens,
request_throughput, request_goodput, output_throughput, total_token_throughput``, the
per-request lists (``input_lens, output_lens, ttfts, itls, start_times, generated_texts,
errors`` are dropped without ``--save-detailed``; ``latencies`` and ``queue_times`` stay),
``max_output_tokens_per_s, max_concurrent_requests, rtfx``, and per selected metric
``mean_X_ms, median_X_ms, std_X_ms, pNN_X_ms`` (plus ``client_queue_time`` stats when
``--max-concurrency`` is set). The numbers are made up but mutually consistent.
"""

from __future__ import annotations

import json
from pathlib import Path


def tpot_ms(concurrency: int, tp: int) -> float:
    return 12.0 * 8 / max(tp, 1) ** 0.5 / 2.83 + 0.35 * concurrency


def result(concurrency: int, *, tp: int = 8, ep: bool = False, model: str = "moonshotai/Kimi-K2.5",
           num_prompts: int = 64, input_len: int = 1024, output_len: int = 256,
           metadata: bool = True, percentiles: tuple[int, ...] = (50, 90, 99)) -> dict:  # fmt: skip
    tpot = tpot_ms(concurrency, tp)
    ttft = 80.0 + 9.0 * concurrency
    e2el = ttft + tpot * (output_len - 1)
    duration = num_prompts / concurrency * e2el / 1000.0
    obj: dict = {
        "date": "20261129-221503", "endpoint_type": "vllm", "backend": "vllm", "label": None,
        "model_id": model, "tokenizer_id": model, "num_prompts": num_prompts,
    }  # fmt: skip
    if metadata:
        obj.update({"tp": str(tp), "dp": "1", "ep": "1" if ep else "0"})
    obj.update({
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": concurrency,
        "duration": duration, "completed": num_prompts, "failed": 0,
        "total_input_tokens": num_prompts * input_len,
        "total_output_tokens": num_prompts * output_len,
        "request_throughput": num_prompts / duration, "request_goodput": None,
        "output_throughput": num_prompts * output_len / duration,
        "total_token_throughput": num_prompts * (input_len + output_len) / duration,
        "latencies": [e2el / 1000.0] * num_prompts, "queue_times": [0.0] * num_prompts,
        "max_output_tokens_per_s": 1.2 * num_prompts * output_len / duration,
        "max_concurrent_requests": concurrency, "rtfx": 0.0,
    })  # fmt: skip
    for name, mean in (("ttft", ttft), ("tpot", tpot), ("itl", tpot * 0.98), ("e2el", e2el)):
        obj[f"mean_{name}_ms"] = mean
        obj[f"median_{name}_ms"] = mean * 0.97
        obj[f"std_{name}_ms"] = mean * 0.1
        for p in percentiles:
            obj[f"p{p}_{name}_ms"] = mean * (0.97 + 0.004 * p)
    for stat in ("mean", "median", "std"):
        obj[f"{stat}_client_queue_time_ms"] = 0.0
    for p in percentiles:
        obj[f"p{p}_client_queue_time_ms"] = 0.0
    return obj


def file_name(obj: dict) -> str:
    """compute_result_filename: {label}-{request_rate}qps-concurrency{c}-{model}-{date}.json."""
    base = obj["model_id"].split("/")[-1]
    return f"vllm-infqps-concurrency{obj['max_concurrency']}-{base}-{obj['date']}.json"


def write_sweep(folder: Path, levels=(1, 4, 16, 64), **kw) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in levels:
        obj = result(c, **kw)
        path = folder / file_name(obj)
        path.write_text(json.dumps(obj))  # json.dump(result_json, outfile): default separators
        # save_to_pytorch_benchmark_format writes this twin next to it; it must be skipped.
        path.with_suffix(".pytorch.json").write_text(json.dumps([{"benchmark": {}}]))
        paths.append(path)
    return paths
