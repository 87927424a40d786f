"""Printed ``Serving Benchmark Result`` blocks as each era prints them, inside real-looking logs.

Each block is written the way the upstream code prints it: ``"{:<40} {:<10}"`` label/value
lines (``{:<10.2f}`` for floats), ``"{s:{c}^{n}}"`` 50-wide section headers and a closing
``"=" * 50``. Lines and their order follow:

- ``V04``: vLLM ``benchmarks/benchmark_serving.py`` v0.4.x (2024): no failed/concurrency
  lines, ``Input token throughput``, TTFT/TPOT/ITL sections with Mean, Median, P99.
- ``V06``: vLLM ``benchmarks/benchmark_serving.py`` v0.6.4-v0.8: ``Traffic request rate``,
  ``Burstiness factor`` and ``Maximum request concurrency`` printed before the block,
  ``Request goodput``, ``Total Token throughput``, ``--percentile-metrics ttft,tpot,itl,e2el``
  with ``--metric-percentiles 50,90,99``.
- ``V10``: ``vllm bench serve`` (vllm/benchmarks/serve.py, vLLM main late 2025): ``Failed
  requests``, ``Maximum request concurrency`` / ``Request rate configured (RPS)`` inside,
  ``Peak output token throughput``, ``Peak concurrent requests``, lower-case ``Total token
  throughput``, then the ``Speculative Decoding`` section with per-position acceptance.
- ``SGL``: SGLang ``python/sglang/bench_serving.py`` (sgl-project/sglang 0033168f):
  ``Backend``, ``Traffic request rate``, ``Max request concurrency``, retokenized tokens,
  ``Concurrency``, ``Accept length``, E2E/TTFT/ITL sections (P95 and Max ITL, no TPOT).
"""

from __future__ import annotations

from typing import Any

HEADER = "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")


def _line(label: str, v: Any) -> str:
    return f"{label:<40} {v:<10.2f}" if isinstance(v, float) else f"{label:<40} {v!s:<10}"


def _section(title: str) -> str:
    return "{s:{c}^{n}}".format(s=title, n=50, c="-")


def _stats(name: str, abbrev: str, title: str, stats: dict[str, float]) -> list[str]:
    return [_section(title)] + [_line(f"{s} {abbrev} (ms):", v) for s, v in stats.items()]


def _totals(c: dict) -> list[str]:
    """The duration, token totals and request rate every vLLM era prints, in its order."""
    return [_line("Benchmark duration (s):", c["duration"]),
            _line("Total input tokens:", c["input_tokens"]),
            _line("Total generated tokens:", c["output_tokens"]),
            _line("Request throughput (req/s):", c["req_s"])]  # fmt: skip


def v04(c: dict) -> str:
    lines = [HEADER, _line("Successful requests:", c["completed"]),
             *_totals(c),
             _line("Input token throughput (tok/s):", c["in_tok_s"]),
             _line("Output token throughput (tok/s):", c["out_tok_s"])]  # fmt: skip
    lines += _stats("ttft", "TTFT", "Time to First Token", {"Mean": c["ttft"], "Median":
                    c["ttft"] - 1.0, "P99": c["ttft"] + 9.0})  # fmt: skip
    lines += _stats("tpot", "TPOT", "Time per Output Token (excl. 1st token)",
                    {"Mean": c["tpot"], "Median": c["tpot"] - 0.1, "P99": c["tpot"] + 1.0})
    lines += _stats("itl", "ITL", "Inter-token Latency",
                    {"Mean": c["tpot"], "Median": c["tpot"] - 0.2, "P99": c["tpot"] + 2.0})
    return "\n".join([*lines, "=" * 50])


def v06(c: dict) -> str:
    pre = [f"Traffic request rate: {c.get('rate', 'inf')}",
           "Burstiness factor: 1.0 (Poisson process)",
           f"Maximum request concurrency: {c['concurrency']}",
           "100%|██████████| 64/64 [00:12<00:00,  5.10it/s]"]  # fmt: skip
    lines = [HEADER, _line("Successful requests:", c["completed"]),
             *_totals(c),
             _line("Request goodput (req/s):", c["goodput"]),
             _line("Output token throughput (tok/s):", c["out_tok_s"]),
             _line("Total Token throughput (tok/s):", c["tot_tok_s"])]  # fmt: skip
    for name, abbrev, title, mean in (("ttft", "TTFT", "Time to First Token", c["ttft"]),
                                      ("tpot", "TPOT", "Time per Output Token (excl. 1st token)",
                                       c["tpot"]),
                                      ("itl", "ITL", "Inter-token Latency", c["tpot"]),
                                      ("e2el", "E2EL", "End-to-end Latency", c["e2el"])):  # fmt: skip
        lines += _stats(name, abbrev, title, {"Mean": mean, "Median": mean - 0.5,
                                              "P50": mean - 0.5, "P90": mean + 1.5,
                                              "P99": mean + 4.0})  # fmt: skip
    return "\n".join([*pre, *lines, "=" * 50])


def v10(c: dict, spec: bool = True, rate: float | None = None) -> str:
    lines = [HEADER, _line("Successful requests:", c["completed"]),
             _line("Failed requests:", c.get("failed", 0)),
             _line("Maximum request concurrency:", c["concurrency"])]  # fmt: skip
    if rate is not None:  # printed only when the rate is finite
        lines.append(_line("Request rate configured (RPS):", rate))
    lines += [*_totals(c),
             _line("Output token throughput (tok/s):", c["out_tok_s"]),
             _line("Peak output token throughput (tok/s):", c["out_tok_s"] * 1.25),
             _line("Peak concurrent requests:", float(c["concurrency"])),
             _line("Total token throughput (tok/s):", c["tot_tok_s"])]  # fmt: skip
    for name, abbrev, title, mean in (("ttft", "TTFT", "Time to First Token", c["ttft"]),
                                      ("tpot", "TPOT", "Time per Output Token (excl. 1st token)",
                                       c["tpot"]),
                                      ("itl", "ITL", "Inter-token Latency", c["tpot"]),
                                      ("e2el", "E2EL", "End-to-end Latency", c["e2el"])):  # fmt: skip
        lines += _stats(name, abbrev, title, {"Mean": mean, "Median": mean - 0.5,
                                              "P99": mean + 4.0})  # fmt: skip
    if spec:
        lines += [_section("Speculative Decoding"), _line("Acceptance rate (%):", 59.97),
                  _line("Acceptance length:", 2.80), _line("Drafts:", 1234),
                  _line("Draft tokens:", 3702), _line("Accepted tokens:", 2220),
                  "Per-position acceptance (%):", _line("  Position 0:", 78.12),
                  _line("  Position 1:", 59.4), _line("  Position 2:", 42.38)]  # fmt: skip
    return "\n".join([*lines, "=" * 50])


def sgl(c: dict, accept: float | None = 2.31) -> str:
    lines = [HEADER, _line("Backend:", "sglang"), _line("Traffic request rate:", "inf"),
             _line("Max request concurrency:", c.get("concurrency") or "not set"),
             _line("Successful requests:", c["completed"]),
             _line("Benchmark duration (s):", c["duration"]),
             _line("Total input tokens:", c["input_tokens"]),
             _line("Total generated tokens:", c["output_tokens"]),
             _line("Total generated tokens (retokenized):", c["output_tokens"] - 3),
             _line("Request throughput (req/s):", c["req_s"]),
             _line("Input token throughput (tok/s):", c["in_tok_s"]),
             _line("Output token throughput (tok/s):", c["out_tok_s"]),
             _line("Total token throughput (tok/s):", c["tot_tok_s"]),
             _line("Concurrency:", c["concurrency"] * 0.97 if c.get("concurrency") else 60.5)]  # fmt: skip
    if accept:
        lines.append(_line("Accept length:", accept))
    lines += _stats("e2el", "E2E Latency", "End-to-End Latency",
                    {"Mean": c["e2el"], "Median": c["e2el"] - 3.0})
    lines += _stats("ttft", "TTFT", "Time to First Token",
                    {"Mean": c["ttft"], "Median": c["ttft"] - 1.0, "P99": c["ttft"] + 9.0})
    lines += _stats("itl", "ITL", "Inter-Token Latency",
                    {"Mean": c["tpot"], "Median": c["tpot"] - 0.2, "P95": c["tpot"] + 1.0,
                     "P99": c["tpot"] + 2.0, "Max": c["tpot"] * 6})  # fmt: skip
    return "\n".join(["", *lines, "=" * 50])


def case(concurrency: int, *, tpot: float = 21.54, completed: int = 64) -> dict:
    """Numbers for one block (consistent enough to read; the tests check them as printed)."""
    out_tokens, in_tokens = completed * 256, completed * 1024
    duration = round(completed / concurrency * (80 + tpot * 255) / 1000, 2)
    return {"concurrency": concurrency, "completed": completed, "duration": duration,
            "input_tokens": in_tokens, "output_tokens": out_tokens,
            "req_s": round(completed / duration, 2), "in_tok_s": round(in_tokens / duration, 2),
            "out_tok_s": round(out_tokens / duration, 2),
            "tot_tok_s": round((in_tokens + out_tokens) / duration, 2),
            "goodput": round(0.9 * completed / duration, 2), "ttft": 80.25 + concurrency,
            "tpot": tpot, "e2el": round(80.25 + tpot * 255, 2)}  # fmt: skip


def namespace(model: str, concurrency: int | None, *, tool: str = "vllm") -> str:
    """``print(args)`` of the benchmark script (argparse.Namespace repr, abridged)."""
    mc = "None" if concurrency is None else str(concurrency)
    if tool == "sglang":
        return (f"benchmark_args=Namespace(backend='sglang', base_url=None, host='0.0.0.0', "
                f"port=30000, dataset_name='random', dataset_path='', model='{model}', "
                f"tokenizer=None, num_prompts=64, sharegpt_output_len=None, "
                f"random_input_len=1024, random_output_len=256, random_range_ratio=0.0, "
                f"request_rate=inf, max_concurrency={mc}, output_file='sgl.jsonl', "
                f"output_details=False, disable_tqdm=False, seed=1, extra_request_body=None, "
                f"lora_name=None, profile=False)")  # fmt: skip
    return (f"Namespace(backend='vllm', base_url=None, host='127.0.0.1', port=8000, "
            f"endpoint='/v1/completions', dataset_name='random', dataset_path=None, "
            f"max_concurrency={mc}, model='{model}', tokenizer=None, best_of=1, "
            f"use_beam_search=False, num_prompts=64, logprobs=None, request_rate=inf, "
            f"burstiness=1.0, seed=0, trust_remote_code=False, disable_tqdm=False, "
            f"profile=False, save_result=False, metadata=None, result_dir=None, "
            f"percentile_metrics='ttft,tpot,itl,e2el', metric_percentiles='50,90,99', "
            f"goodput=['tpot:50'], random_input_len=1024, random_output_len=256, "
            f"random_range_ratio=1.0, random_prefix_len=0, served_model_name=None, "
            f"lora_modules=None)")  # fmt: skip


SERVER_NOISE = """\
INFO 11-30 10:02:11 [api_server.py:1880] vLLM API server version 0.11.0
INFO 11-30 10:02:11 [utils.py:328] non-default args: {'model': 'Qwen/Qwen3-8B'}
WARNING 11-30 10:02:14 [__init__.py:1217] Default sampling parameters have been overridden
Starting initial single prompt test run...
Initial test run completed. Starting main benchmark run...
  0%|          | 0/64 [00:00<?, ?it/s]
 50%|█████     | 32/64 [00:06<00:06,  5.12it/s]
100%|██████████| 64/64 [00:12<00:00,  5.10it/s]"""
