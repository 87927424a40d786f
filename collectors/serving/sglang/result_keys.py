"""SGLang ``bench_serving --output-file`` keys of every era, mapped onto vLLM's names.

The JSONL line is the ``result`` dict of ``benchmark()`` in python/sglang/bench_serving.py
(sgl-project/sglang; ``git log -p`` of that file, commits below). ``json.dumps`` writes an
infinite request rate as bare ``Infinity``; no era writes the model or ``num_prompts``.

| from | commit | keys |
|---|---|---|
| 2024-07-20 | 4b4a67f8 | 8: ``median_ttft``, ``median_itl`` (holding the MEAN ITL: ``metrics.mean_itl_ms``), ``output_token_throughput``, the dataset arguments |
| 2024-07-21 | 0fdb3127 | + ``backend``, ``total_input``, ``total_output``; 6a846bb1 ``random_range_ratio``; 65bd1338 ``benchmark_duration``; df7c4c19 ``total_output_retokenized`` |
| 2024-07-24 | fa7ccb33 | 16: + ``mean_e2e_latency``, ``median_e2e_latency``; ``median_itl`` is now the median |
| 2024-08-12 | 41598e0d | 17: ``*_ms`` and ``*_tokens`` names, ``output_throughput``, ``duration``, ``completed`` |
| 2024-11-23 | 60769be1 | 18: + ``max_concurrency`` (``null`` when not set) |
| 2025-01-07 | bdc1acf6 | 21: + ``mean_ttft_ms``, ``mean_itl_ms``, ``input_throughput`` |
| 2025-01-10 | 8f157893 | 31: + ``std``/``p99`` of each, ``{mean,median,std,p99}_tpot_ms`` |
| 2025-01-20 | 287d07a6 | 33: + ``request_throughput``, ``concurrency`` (measured mean) |
| 2025-03-03 | ac238727 | 35: + ``p95_itl_ms``, ``accept_length`` |
| 2025-10-08 | e3bb7f5a | 37: + ``total_input_text_tokens``, ``total_input_vision_tokens`` |
| 2025-11-03 | 88342607 | 39: + ``tag``, ``server_info`` (an object); ``request_rate`` may be ``"trace"`` |
| 2025-11-12 | c9b58164 | 40: + ``total_throughput`` |

A statistic an era did not write stays missing (NULL in the store); nothing is derived.

``server_info`` is the server's ``GET /get_server_info`` as the benchmark read it
(python/sglang/srt/entrypoints/http_server.py: ``dataclasses.asdict(server_args)``, so the
values after ``ServerArgs.__post_init__``, plus ``version``). The scheduler facts the planner
predicts with are kept as ``server_info.<field>`` scalars (``serving_bench.extra``); the
layout is read from the same object (collectors/sglang/layout.py ``from_server_info``).
"""

from __future__ import annotations

from typing import Any

from collectors.serving.results import rename_keys

# Current names (0033168f and later) -> vLLM's.
CURRENT = {
    **{f"{s}_e2e_latency_ms": f"{s}_e2el_ms" for s in ("mean", "median", "std", "p90", "p99")},
    "accept_length": "spec_decode_acceptance_length",
    "concurrency": "mean_concurrency",  # measured; the limit is max_concurrency
    "total_throughput": "total_token_throughput",
}
# July 2024 names (4b4a67f8 .. 41598e0d) -> the names that replaced them.
JULY_2024 = {
    "median_ttft": "median_ttft_ms",
    "output_token_throughput": "output_throughput",
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
    "total_output_retokenized": "total_output_tokens_retokenized",
    "mean_e2e_latency": "mean_e2el_ms",
    "median_e2e_latency": "median_e2el_ms",
    "benchmark_duration": "duration",
}


# ServerArgs fields the Serving page's prediction reads (planner/specs/launch_flags.py).
SERVER_FACTS = ("chunked_prefill_size", "scheduler_recv_interval", "dp_size",
                "enable_dp_attention")  # fmt: skip


def server_info_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ``server_info`` object of a result line (a PD deployment's decode server's), or
    None."""
    info = obj.get("server_info")
    if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]  # bench_serving reads the decode side's state the same way
    return info if isinstance(info, dict) else None


def with_server_info(obj: dict[str, Any], info: dict[str, Any] | None) -> dict[str, Any]:
    """``obj`` with ``info``'s scheduler facts as ``server_info.<field>`` scalars and its
    version where the line names none."""
    if not info:
        return obj
    out = dict(obj)
    for field in SERVER_FACTS:
        value = info.get(field)
        if isinstance(value, (bool, int, float)):
            out.setdefault(f"server_info.{field}", value)
    if info.get("version") is not None:
        out.setdefault("version", str(info["version"]))
    return out


def fill_from_server(obj: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """A result line that records no ``server_info`` (SGLang before 88342607) with what a
    sweep read from the same server's ``/get_server_info``."""
    return obj if server_info_of(obj) is not None else with_server_info(obj, info)


def normalize(obj: dict[str, Any]) -> dict[str, Any]:
    """One result line with vLLM's key names; keys already named so win."""
    out = with_server_info(dict(obj), server_info_of(obj))
    if "median_itl" in out:
        # Until fa7ccb33 (the commit that added mean_e2e_latency) this key held the mean.
        out.setdefault("median_itl_ms" if "mean_e2e_latency" in obj else "mean_itl_ms",
                       out.pop("median_itl"))  # fmt: skip
    return rename_keys(rename_keys(out, JULY_2024), CURRENT)
