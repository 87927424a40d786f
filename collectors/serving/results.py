"""Benchmark results of any serving engine into ``serving_bench`` rows: JSON, JSONL, logs.

A file is tried as one JSON object, then as JSON lines, then as a text log holding printed
``Serving Benchmark Result`` blocks (collectors/serving/printed.py). Each engine maps its own
keys of every era onto vLLM's (its adapter's ``normalize``, e.g. collectors/serving/sglang/
result_keys.py: SGLang's ``mean_e2e_latency_ms`` is ``mean_e2el_ms``). Bare ``Infinity``
and ``NaN`` (what Python's ``json.dumps`` writes) are read; a statistic a file lacks stays
NULL.

vLLM ``--save-result`` JSON

Shape (vllm/benchmarks/serve.py, ``main_async`` + ``benchmark``): top-level ``date``,
``endpoint_type``, ``backend``, ``label``, ``model_id``, ``tokenizer_id``, ``num_prompts``,
any ``--metadata KEY=VALUE`` pairs, ``request_rate`` (a number or the string ``"inf"``),
``burstiness``, ``max_concurrency``, then ``duration``, ``completed``, ``failed``,
``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
``output_throughput``, ``total_token_throughput``, ``max_output_tokens_per_s``,
``max_concurrent_requests`` and ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`` (pNN from
``--metric-percentiles``, default 99). ``--append-result`` writes one JSON object per line.
Older releases (benchmarks/benchmark_serving.py) wrote the same keys.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from typing import Any

from collectors.core.errors import InputError
from collectors.serving.layout import Layout
from store import bounds

METRICS = ("ttft", "tpot", "itl", "e2el")
_STATS = ("mean", "median", "std", "p90", "p99")
_COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens")  # integers
_BIG = {"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
        "queue_times", "generated_texts", "errors"}  # fmt: skip
_LAYOUT_KEYS = {"tp": ("tp", "tensor_parallel_size"), "pp": ("pp", "pipeline_parallel_size"),
                "dp": ("dp", "data_parallel_size")}  # fmt: skip


def is_result(obj: dict[str, Any]) -> bool:
    """A benchmark result of any era holds a throughput or a latency statistic."""
    return any(_number(obj.get(k)) is not None for k in ("request_throughput", "output_throughput")) \
        or any(_number(obj.get(f"{s}_{m}_ms")) is not None for m in METRICS for s in _STATS)


def rename_keys(obj: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``obj`` with each key of ``names`` renamed to its value; a key already there wins."""
    out = dict(obj)
    for theirs, ours in names.items():
        if theirs in out and theirs != ours:
            out.setdefault(ours, out.pop(theirs))
    return out


def layout_from_metadata(obj: dict[str, Any]) -> Layout | None:
    """``--metadata tp=8 dp=1 ep=1`` pairs saved in the result (values are strings)."""
    layout = Layout(source="metadata")
    for attr, keys in _LAYOUT_KEYS.items():
        for k in keys:
            if _int(obj.get(k)) is not None:
                setattr(layout, attr, _int(obj.get(k)))
    if layout.tp is None:
        return None
    ep = obj.get("ep", obj.get("enable_expert_parallel"))
    layout.ep = str(ep).lower() in ("1", "true", "yes", "on") if ep is not None else False
    layout.pp, layout.dp = layout.pp or 1, layout.dp or 1
    return layout


_SPEC = {"spec_acceptance_rate": "spec_decode_acceptance_rate",
         "spec_acceptance_length": "spec_decode_acceptance_length",
         "spec_drafts": "spec_decode_num_drafts", "spec_draft_tokens": "spec_decode_draft_tokens",
         "spec_accepted_tokens": "spec_decode_accepted_tokens"}  # fmt: skip


def to_row(obj: dict[str, Any], source: str, layout: Layout | None, version: str | None,
           engine: str = "vllm", fmt: str = "json", where: str = "",
           notes: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """One serving_bench row (without run_id); ``version`` is the server's (engine's).

    Every number is checked against its physical bound (store/bounds.py): a value no machine
    can produce is refused in one line naming ``where`` and the field. A latency statistic
    the tool wrote as NaN (NumPy's answer over no requests) is stored as no value and said
    in ``notes``."""
    f = _Fields(obj, where or source)
    raw_rate = obj.get("request_rate")
    rate = f.rate("request_rate")  # NULL = inf (also when absent: the tools' default)
    replayed = isinstance(rate, str)  # SGLang's "trace": recorded times
    all_at_once = not replayed and (rate is None or math.isinf(rate))
    rate = None if all_at_once or replayed else rate
    max_c = f.count("max_concurrency", bounds.CONCURRENCY)
    num_prompts = f.count("num_prompts", bounds.REQUESTS)
    completed = f.count("completed", bounds.REQUESTS)
    concurrency = max_c if max_c is not None else (num_prompts if all_at_once else None)
    row: dict[str, Any] = {
        "source": source, "result_date": f.text("date"), "bench_label": f.text("label"),
        "backend": f.text("backend") or f.text("endpoint_type"),
        "model_id": f.text("model_id"), "tokenizer_id": f.text("tokenizer_id"),
        "num_prompts": num_prompts, "request_rate": rate,
        "burstiness": f.number("burstiness", bounds.RATIO),
        "max_concurrency": max_c, "concurrency": concurrency,
        "input_len": f.mean_len("input_lens", "total_input_tokens", completed)
        or f.number("args_input_len", bounds.TOKENS_PER_REQUEST),
        "output_len": f.mean_len("output_lens", "total_output_tokens", completed)
        or f.number("args_output_len", bounds.TOKENS_PER_REQUEST),
        "duration_s": f.number("duration", bounds.DURATION_S),
    }  # fmt: skip
    for key, bound in _TOP_BOUNDS.items():
        row[key] = f.count(key, bound) if key in _COUNTS else f.number(key, bound)
    for m in METRICS:
        for s in _STATS:
            bound = _STAT_BOUNDS[m] if s != "std" else _SPREAD_BOUNDS[m]
            row[f"{s}_{m}_ms"] = f.number(f"{s}_{m}_ms", bound, nan_is_none=True)
    _tokens_behind_the_tpot(row, f.where)
    lay = layout or Layout()
    for size in ("tp", "pp", "dp"):
        if (why := bounds.PARALLEL.problem(getattr(lay, size))) and getattr(lay, size) is not None:
            raise InputError(f"{f.where}: the layout's {size} {why}")
    row.update(lay.row())
    version = version or f.text(f"{engine}_version") or f.text("version")
    row["engine"], row["engine_version"], row["result_format"] = engine, version, fmt
    row["vllm_version"] = version if engine == "vllm" else None
    row["request_goodput"] = f.number("request_goodput", bounds.REQUEST_RATE)
    for col, key in _SPEC.items():
        row[col] = (f.number(key, _SPEC_BOUNDS[col]) if col.endswith(("rate", "length"))
                    else f.count(key, bounds.TOKENS))  # fmt: skip
    known = (set(row) | set(_SPEC.values()) | {"version", f"{engine}_version"}
             | {"date", "label", "endpoint_type", "request_rate", "duration"})  # fmt: skip
    extra = {k: _json_safe(v) for k, v in obj.items() if k not in known and k not in _BIG
             and isinstance(v, (str, int, float, bool, type(None)))}  # fmt: skip
    if replayed:
        extra["request_rate"] = raw_rate
    row["extra"] = json.dumps(extra, sort_keys=True, default=str, allow_nan=False)
    if f.no_sample and notes is not None:
        notes.append(f"{f.where}: {', '.join(f.no_sample)} written as NaN (a statistic over no "
                     "requests): stored as no value")  # fmt: skip
    return row


_STAT_BOUNDS = {"ttft": bounds.LATENCY_MS, "tpot": bounds.TOKEN_MS, "itl": bounds.GAP_MS,
                "e2el": bounds.LATENCY_MS}  # fmt: skip
# a spread is no time per token: a std of a few us is a steady server, not a fast one
_SPREAD_BOUNDS = {**_STAT_BOUNDS, "tpot": bounds.GAP_MS}
_TOP_BOUNDS = {
    "completed": bounds.REQUESTS, "failed": bounds.REQUESTS,
    "total_input_tokens": bounds.TOKENS, "total_output_tokens": bounds.TOKENS,
    "request_throughput": bounds.REQUEST_RATE, "output_throughput": bounds.TOKEN_RATE,
    "total_token_throughput": bounds.TOKEN_RATE, "max_output_tokens_per_s": bounds.TOKEN_RATE,
    "max_concurrent_requests": replace(bounds.REQUESTS, whole=False),
}  # fmt: skip
_SPEC_BOUNDS = {"spec_acceptance_rate": bounds.PERCENT, "spec_acceptance_length": bounds.RATIO}


def _tokens_behind_the_tpot(row: dict[str, Any], where: str) -> None:
    """A time per output token needs output tokens: refused when the result says none."""
    if row["total_output_tokens"] != 0:
        return
    timed = [k for k in ("mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "median_itl_ms")
             if row[k]]  # fmt: skip
    if timed:
        raise InputError(f"{where}: total_output_tokens is 0 but {timed[0]} is "
                         f"{row[timed[0]]:g} ms: a time per output token needs output tokens")  # fmt: skip


class _Fields:
    """A result's values read strictly: a value that is there must be a plausible one."""

    def __init__(self, obj: dict[str, Any], where: str) -> None:
        self.obj, self.where = obj, where
        self.no_sample: list[str] = []  # statistics the tool wrote as NaN

    def number(self, key: str, bound: bounds.Bound, nan_is_none: bool = False) -> float | None:
        value = self.obj.get(key)
        if value is None:
            return None
        number = _number(value)
        if number is None:
            raise InputError(f"{self.where}: {key} {_shown(value)} is not a number")
        if nan_is_none and math.isnan(number):
            self.no_sample.append(key)
            return None
        if why := bound.problem(number):
            raise InputError(f"{self.where}: {key} {why}")
        return number

    def count(self, key: str, bound: bounds.Bound) -> int | None:
        number = self.number(key, bound)
        return None if number is None else int(number)

    def rate(self, key: str) -> float | str | None:
        """A request rate: a number, infinity (all at once), or words ("trace": SGLang
        replaying recorded arrival times)."""
        value = self.obj.get(key)
        number = _number(value)
        if value is None or (number is None and isinstance(value, str)):
            return value
        if number == math.inf:
            return math.inf
        return self.number(key, bounds.REQUEST_RATE)

    def text(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise InputError(f"{self.where}: {key} is a JSON {_json_kind(value)}, not text")

    def mean_len(self, lens_key: str, total_key: str, n: int | None) -> float | None:
        """Mean tokens per request: of the per-request list, else the total over ``n``."""
        lens = self.obj.get(lens_key)
        if isinstance(lens, list) and lens and all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in lens):  # fmt: skip
            mean = float(statistics.fmean(lens)) if all(x >= 0 for x in lens) else -1.0
        else:
            total = self.number(total_key, bounds.TOKENS)
            mean = total / n if total is not None and n else None
        if mean is not None and (why := bounds.TOKENS_PER_REQUEST.problem(mean)):
            raise InputError(f"{self.where}: the mean of {lens_key} {why}")
        return mean


def _number(v: Any) -> float | None:
    """A number, or a number written as text ("8", "inf", as --metadata saves them); None
    for anything else (bool included)."""
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    try:
        return float(v)
    except (ValueError, OverflowError):  # text; an int too large for a float
        return math.inf if isinstance(v, int) else None


def _int(v: Any) -> int | None:
    f = _number(v)
    return None if f is None or not math.isfinite(f) else int(f)


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_kind(v: Any) -> str:
    return {dict: "object", list: "array", bool: "boolean"}.get(type(v), type(v).__name__)


def _json_safe(v: Any) -> Any:
    """Standard JSON has no NaN or infinity: ``extra`` stays readable by any JSON reader (jq,
    a browser, ``json.loads(..., parse_constant=...)``), not only by DuckDB's lenient one. A
    NaN is no value (NULL, as in the columns); an infinity is kept as text."""
    if isinstance(v, float) and math.isnan(v):
        return None
    return str(v) if isinstance(v, float) and math.isinf(v) else v
