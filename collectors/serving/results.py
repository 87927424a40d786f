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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.core.errors import InputError
from collectors.serving import printed
from collectors.serving.layout import Layout

METRICS = ("ttft", "tpot", "itl", "e2el")
_STATS = ("mean", "median", "std", "p90", "p99")
_TOP = (
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
    "request_throughput", "output_throughput", "total_token_throughput",
    "max_output_tokens_per_s", "max_concurrent_requests",
)  # fmt: skip
_COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens")  # integers
_BIG = {"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
        "queue_times", "generated_texts", "errors"}  # fmt: skip
_LAYOUT_KEYS = {"tp": ("tp", "tensor_parallel_size"), "pp": ("pp", "pipeline_parallel_size"),
                "dp": ("dp", "data_parallel_size")}  # fmt: skip


# Folder expansion: saved results and the usual names of captured logs.
FOLDER_GLOBS = ("*.json", "*.jsonl", "*.log", "*.out", "*.txt")

@dataclass
class Result:
    """One benchmark result read from a file: the object, how it was stored, its place."""

    obj: dict[str, Any]
    fmt: str  # json | jsonl | printed
    part: int | None = None  # index in a file holding several results


def result_files(paths: list[Path]) -> list[Path]:
    """Expand folders to their results and logs, skipping the ``*.pytorch.json`` twins and
    text files in a folder that hold no printed block (other logs lying beside them)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = {q for g in FOLDER_GLOBS for q in p.glob(g) if q.is_file()}
            out.extend(sorted(q for q in found if not q.name.endswith(".pytorch.json")
                              and (q.suffix in (".json", ".jsonl") or _has_block(q))))  # fmt: skip
        elif p.is_file():
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    if not out:
        raise InputError(f"{', '.join(map(str, paths))}: no benchmark result (*.json, *.jsonl) "
                         "or log with a printed result block (*.log, *.out, *.txt) found")  # fmt: skip
    return out


def _has_block(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return any(printed.HEADER_TEXT in line for line in fh)
    except OSError:
        return True  # let the import say what is wrong with it


def load_results(path: Path, normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None
                 ) -> list[Result]:  # fmt: skip
    """Every result in a file: one JSON object, JSON lines, or printed blocks in a log;
    ``normalize`` (the engine's) renames a JSON result's keys to vLLM's first."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    try:
        found = [Result(json.loads(text), "json")]
    except ValueError as exc:
        found = _json_lines(text)
        if found is None:
            blocks = printed.parse(text)
            if not blocks:
                raise InputError(
                    f"{path}: not JSON ({exc}) and no printed 'Serving Benchmark Result' block "
                    "in it (a results file or a log of the benchmark's output is needed)"
                ) from None
            return [Result(printed.to_result(b), "printed", i if len(blocks) > 1 else None)
                    for i, b in enumerate(blocks)]  # fmt: skip
    for i, r in enumerate(found):
        if isinstance(r.obj, dict) and normalize is not None:
            r.obj = normalize(r.obj)
        if not isinstance(r.obj, dict) or not is_result(r.obj):
            raise InputError(
                f"{path}: not a serving benchmark result (no throughput or latency statistic "
                "such as output_throughput or median_ttft_ms, as `vllm bench serve "
                "--save-result` or sglang.bench_serving --output-file write)"
            )
        r.part = i if len(found) > 1 else None
    return found


def _json_lines(text: str) -> list[Result] | None:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        return [Result(json.loads(line), "jsonl") for line in lines]
    except ValueError:
        return None


def is_result(obj: dict[str, Any]) -> bool:
    """A benchmark result of any era holds a throughput or a latency statistic."""
    return any(_num(obj.get(k)) is not None for k in ("request_throughput", "output_throughput")) \
        or any(_num(obj.get(f"{s}_{m}_ms")) is not None for m in METRICS for s in _STATS)


def rename_keys(obj: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``obj`` with each key of ``names`` renamed to its value; a key already there wins."""
    out = dict(obj)
    for theirs, ours in names.items():
        if theirs in out and theirs != ours:
            out.setdefault(ours, out.pop(theirs))
    return out


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _int(v: Any) -> int | None:
    f = _num(v)
    return None if f is None or math.isinf(f) else int(f)


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
           engine: str = "vllm", fmt: str = "json") -> dict[str, Any]:  # fmt: skip
    """One serving_bench row (without run_id); ``version`` is the server's (engine's)."""
    raw_rate = obj.get("request_rate")
    rate = _num(raw_rate)  # NULL = inf (also when absent: the tools' default)
    replayed = isinstance(raw_rate, str) and rate is None  # SGLang's "trace": recorded times
    all_at_once = not replayed and (rate is None or math.isinf(rate))
    rate = None if all_at_once else rate
    max_c = _int(obj.get("max_concurrency"))
    num_prompts = _int(obj.get("num_prompts"))
    completed = _int(obj.get("completed"))
    concurrency = max_c if max_c is not None else (num_prompts if all_at_once else None)
    row: dict[str, Any] = {
        "source": source, "result_date": obj.get("date"), "bench_label": obj.get("label"),
        "backend": obj.get("backend") or obj.get("endpoint_type"),
        "model_id": obj.get("model_id"), "tokenizer_id": obj.get("tokenizer_id"),
        "num_prompts": num_prompts, "request_rate": rate, "burstiness": _num(obj.get("burstiness")),
        "max_concurrency": max_c, "concurrency": concurrency,
        "input_len": _mean_len(obj, "input_lens", "total_input_tokens", completed)
        or _num(obj.get("args_input_len")),
        "output_len": _mean_len(obj, "output_lens", "total_output_tokens", completed)
        or _num(obj.get("args_output_len")),
        "duration_s": _num(obj.get("duration")),
    }  # fmt: skip
    for key in _TOP[1:]:
        row[key] = _int(obj.get(key)) if key in _COUNTS else _num(obj.get(key))
    row.update({k: _num(obj.get(k)) for k in (f"{s}_{m}_ms" for m in METRICS for s in _STATS)})
    lay = layout or Layout()
    row.update(lay.row())
    version = version or obj.get(f"{engine}_version") or obj.get("version")
    row["engine"], row["engine_version"], row["result_format"] = engine, version, fmt
    row["vllm_version"] = version if engine == "vllm" else None
    row["request_goodput"] = _num(obj.get("request_goodput"))
    for col, key in _SPEC.items():
        row[col] = _num(obj.get(key)) if col.endswith(("rate", "length")) else _int(obj.get(key))
    known = (set(row) | set(_SPEC.values()) | {"version", f"{engine}_version"}
             | {"date", "label", "endpoint_type", "request_rate", "duration"})  # fmt: skip
    extra = {k: _json_safe(v) for k, v in obj.items() if k not in known and k not in _BIG
             and isinstance(v, (str, int, float, bool, type(None)))}  # fmt: skip
    if replayed:
        extra["request_rate"] = raw_rate
    row["extra"] = json.dumps(extra, sort_keys=True, default=str, allow_nan=False)
    return row


def _json_safe(v: Any) -> Any:
    """Standard JSON has no NaN or infinity: ``extra`` stays readable by any JSON reader (jq,
    a browser, ``json.loads(..., parse_constant=...)``), not only by DuckDB's lenient one. A
    NaN is no value (NULL, as in the columns); an infinity is kept as text."""
    if isinstance(v, float) and math.isnan(v):
        return None
    return str(v) if isinstance(v, float) and math.isinf(v) else v


def _mean_len(obj: dict[str, Any], lens_key: str, total_key: str, n: int | None) -> float | None:
    lens = obj.get(lens_key)
    if isinstance(lens, list) and lens and all(isinstance(x, (int, float)) for x in lens):
        return float(statistics.fmean(lens))
    total = _num(obj.get(total_key))
    return total / n if total is not None and n else None
