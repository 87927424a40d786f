"""Printed ``Serving Benchmark Result`` blocks from terminal scroll-back, slurm or CI logs.

Every era prints ``{:<40} {:<10}`` label/value lines between a ``=== Serving Benchmark
Result ===`` header and a line of ``=``; each block becomes one result dict keyed like the
``--save-result`` JSON (``completed``, ``mean_tpot_ms``, ...), values as printed. Formats
(read in the upstream source):

- vLLM ``benchmarks/benchmark_serving.py`` (2024, v0.4-v0.6): Successful requests, duration,
  tokens, request/input/output throughput, TTFT/TPOT/ITL sections (Mean, Median, P99).
- vLLM ``benchmarks/benchmark_serving.py`` (v0.6.4-v0.8): ``Traffic request rate``,
  ``Burstiness factor`` and ``Maximum request concurrency`` printed *before* the block,
  ``Request goodput (req/s)``, ``Total Token throughput``, ``--percentile-metrics`` sections
  incl. ``End-to-end Latency`` (``Mean E2EL (ms)``) and any ``--metric-percentiles``.
- vLLM ``vllm/benchmarks/serve.py`` (``vllm bench serve``, v0.10+): ``Failed requests``,
  ``Maximum request concurrency`` and ``Request rate configured (RPS)`` inside the block,
  ``Peak output token throughput``, ``Peak concurrent requests``, ``RTFx`` and the
  ``Speculative Decoding`` section (Acceptance rate (%), Acceptance length, Drafts, Draft
  tokens, Accepted tokens, Per-position acceptance).
- SGLang ``python/sglang/bench_serving.py`` (sgl-project/sglang 0033168f): ``Backend``,
  ``Traffic request rate``, ``Max request concurrency`` (``not set``), ``Total generated
  tokens (retokenized)``, ``Concurrency`` (measured mean), ``Accept length``,
  ``End-to-End Latency`` (``Mean E2E Latency (ms)``), ``P95/Max ITL (ms)``.

Args come from the last ``Namespace(...)`` line before a block (``print(args)`` in every
version; SGLang also prints ``benchmark_args=Namespace(...)``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

HEADER_TEXT = b"Serving Benchmark Result"
_HEADER = re.compile(r"^(?P<prefix>.*?)=+ ?Serving Benchmark Result ?=+\s*$")
_RULE = re.compile(r"^=+\s*$")
_SECTION = re.compile(r"^-{3,}.*-{3,}\s*$|^-+$")
_PAIR = re.compile(r"^\s*(?P<label>[A-Za-z][^:]*?):\s*(?P<value>.*?)\s*$")
_STAT = re.compile(r"^(?P<stat>mean|median|std|max|min|p\d+(?:\.\d+)?) (?P<metric>.+) \(ms\)$")
_POSITION = re.compile(r"^position (\d+)$")
_NAMESPACE = re.compile(r"Namespace\((?P<body>.*)\)\s*$")
_ARG = re.compile(r"(?:^|, )(?P<key>\w+)=(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|"
                  r"[^,()\[\]{}]*)")  # fmt: skip

METRIC_NAMES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2el",
                "e2e latency": "e2el"}  # fmt: skip

# label (lower case, without the colon) -> result key, as the JSON results name them.
LABELS = {
    "successful requests": "completed",
    "failed requests": "failed",
    "maximum request concurrency": "max_concurrency",
    "max request concurrency": "max_concurrency",
    "request rate configured (rps)": "request_rate",
    "traffic request rate": "request_rate",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "total input text tokens": "total_input_text_tokens",
    "total input vision tokens": "total_input_vision_tokens",
    "request throughput (req/s)": "request_throughput",
    "request goodput (req/s)": "request_goodput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "total token throughput (tok/s)": "total_token_throughput",
    "rtfx (inverse real-time factor)": "rtfx",
    "backend": "backend",
    "concurrency": "mean_concurrency",  # SGLang: sum(e2e latencies) / duration
    "accept length": "spec_decode_acceptance_length",  # SGLang
    "acceptance rate (%)": "spec_decode_acceptance_rate",
    "acceptance length": "spec_decode_acceptance_length",
    "drafts": "spec_decode_num_drafts",
    "draft tokens": "spec_decode_draft_tokens",
    "accepted tokens": "spec_decode_accepted_tokens",
}
# Printed before the block by benchmark_serving.py v0.6.4-v0.8 (and kept if repeated inside).
_TRAFFIC_LINE = re.compile(r"(?P<label>Traffic request rate|Maximum request concurrency|"
                           r"Burstiness factor):\s*(?P<value>.*?)\s*$")  # fmt: skip
@dataclass
class Block:
    """One printed result: its values keyed like the JSON results, and the args seen before."""

    line: int  # 1-based line of the header
    values: dict[str, Any] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)


def value(text: str) -> Any:
    """A printed value as printed: int, float, ``inf``, None for ``not set``/``None``, or text."""
    t = text.strip()
    if t.lower() in ("not set", "none", "n/a", ""):
        return None
    for cast in (int, float):
        try:
            return cast(t)
        except ValueError:
            pass
    return t


def parse_namespace(line: str) -> dict[str, Any]:
    """The scalar ``key=value`` pairs of a printed ``argparse.Namespace``."""
    m = _NAMESPACE.search(line)
    if not m:
        return {}
    out: dict[str, Any] = {}
    for a in _ARG.finditer(m["body"]):
        raw = a["value"].strip()
        if raw[:1] in ("'", '"'):
            out[a["key"]] = raw[1:-1]
        elif raw in ("True", "False"):
            out[a["key"]] = raw == "True"
        else:
            out[a["key"]] = value(raw)
    return out


def _key(label: str) -> str | None:
    low = " ".join(label.lower().split())
    if low in LABELS:
        return LABELS[low]
    if (m := _STAT.match(low)) and m["metric"] in METRIC_NAMES:
        return f"{m['stat']}_{METRIC_NAMES[m['metric']]}_ms"
    if p := _POSITION.match(low):
        return f"spec_decode_position_{p[1]}_acceptance_pct"
    if low.startswith("burstiness factor"):
        return "burstiness"
    return None


def _slug(label: str) -> str:
    return "printed_" + re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def _put(values: dict[str, Any], label: str, raw: str) -> None:
    key = _key(label)
    v = value(raw)
    if key == "burstiness" and isinstance(v, str):  # "1.0 (Poisson process)"
        v = value(v.split()[0])
    values[key or _slug(label)] = v


def parse(text: str | Iterable[str]) -> list[Block]:
    """Every printed result block in ``text`` (a string, or its lines one at a time: a log
    of any length is read in bounded memory); lines around them are ignored."""
    lines = text.splitlines() if isinstance(text, str) else text
    found = _Blocks()
    for number, line in enumerate(lines, 1):
        found.feed(number, line.rstrip("\r\n"))
    found.finish()
    return found.blocks


class _Blocks:
    """A state machine over a log's lines: outside a block, or inside one after its header."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.args: dict[str, Any] = {}  # the last Namespace(...) line's
        self.traffic: dict[str, Any] = {}  # values printed just before a block
        self.block: Block | None = None
        self.prefix = ""  # what stamps each line of the block (a CI runner's time)

    def feed(self, number: int, line: str) -> None:
        if self.block is not None and self._inside(line):
            return
        if "Namespace(" in line:
            self.args = parse_namespace(line) or self.args
            self.traffic = {}
        head = _HEADER.match(line)
        if not head:
            if pair := _TRAFFIC_LINE.search(line):
                _put(self.traffic, pair["label"], pair["value"])
            return
        self.prefix = head["prefix"]
        self.block = Block(line=number, values=dict(self.traffic), args=dict(self.args))

    def _inside(self, line: str) -> bool:
        """Take a line of the open block; False when it ends the block (the line is then
        read as any other: it may be the next block's header)."""
        # CI runners stamp every line with a fixed-width time: strip the header's width.
        body = line[len(self.prefix) :]
        if _RULE.match(body) or _HEADER.match(line):
            self.finish()
            return False
        stripped = body.strip()
        if stripped and not _SECTION.match(stripped) and not stripped.endswith(":"):
            pair = _PAIR.match(stripped)
            if not pair:  # the block was cut short (a log line interleaved): stop here
                self.finish()
                return False
            _put(self.block.values, pair["label"], pair["value"])  # type: ignore[union-attr]
        return True

    def finish(self) -> None:
        if self.block is not None and _has_results(self.block.values):
            self.blocks.append(self.block)
        if self.block is not None:
            self.traffic = {}
        self.block = None


def _has_results(values: dict[str, Any]) -> bool:
    return "request_throughput" in values or any(k.endswith("_ms") for k in values)


def to_result(block: Block) -> dict[str, Any]:
    """A result dict in the JSON results' shape (what ``serving.results.to_row`` reads)."""
    out: dict[str, Any] = dict(block.values)
    a = block.args
    out.setdefault("backend", a.get("backend"))
    out["model_id"] = a.get("served_model_name") or a.get("model")
    out["tokenizer_id"] = a.get("tokenizer") or a.get("model")
    for key in ("num_prompts", "burstiness", "label"):
        if out.get(key) is None and a.get(key) is not None:
            out[key] = a[key]
    for key in ("request_rate", "max_concurrency"):
        if key not in out and key in a:
            out[key] = a[key]
    in_len = a.get("random_input_len") or a.get("input_len") or a.get("sonnet_input_len")
    out_len = (a.get("random_output_len") or a.get("output_len") or a.get("sonnet_output_len")
               or a.get("sharegpt_output_len"))  # fmt: skip
    if in_len is not None:
        out["args_input_len"] = in_len
    if out_len is not None:
        out["args_output_len"] = out_len
    if a.get("dataset_name"):
        out["dataset_name"] = a["dataset_name"]
    if a.get("goodput"):
        out["goodput"] = str(a["goodput"])
    out["printed_block_line"] = block.line
    return out
