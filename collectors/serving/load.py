"""A streaming load generator for an OpenAI-compatible completions endpoint.

N requests at concurrency c (threads), fixed prompt and output lengths, ``stream=true`` so
time to first token (TTFT) and inter-token latencies (ITL) are measured on the client, the
way ``vllm bench serve`` measures them (vllm/benchmarks/lib/endpoint_request_func.py):
TTFT = first chunk with text; ITL = gap between later chunks; TPOT = (E2E - TTFT) /
(output tokens - 1), output tokens from the final ``usage`` chunk when the server sends it.
"""

from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from collectors.core.stats import percentile
from collectors.serving import client


@dataclass
class RequestResult:
    index: int
    start_s: float  # since the load started
    ttft_s: float | None = None
    itls_s: list[float] = field(default_factory=list)
    e2el_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tpot_s(self) -> float | None:
        if self.e2el_s is None or self.ttft_s is None or (self.output_tokens or 0) < 2:
            return None
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1)

    def row(self) -> dict:
        ms = lambda v: None if v is None else v * 1000.0  # noqa: E731
        return {
            "request_index": self.index, "start_s": self.start_s,
            "ttft_ms": ms(self.ttft_s), "tpot_ms": ms(self.tpot_s), "e2el_ms": ms(self.e2el_s),
            "itl_mean_ms": ms(statistics.fmean(self.itls_s)) if self.itls_s else None,
            "itl_max_ms": ms(max(self.itls_s)) if self.itls_s else None,
            "chunks": len(self.itls_s) + (1 if self.ttft_s is not None else 0),
            "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
            "error": self.error,
        }  # fmt: skip


@dataclass(frozen=True)
class LoadSpec:
    base_url: str
    model: str
    num_requests: int
    concurrency: int
    input_len: int
    output_len: int
    timeout_s: float = 120.0
    api_key: str | None = None

    def prompt(self, index: int) -> str:
        # One short word per intended token; a distinct head per request defeats prefix caching.
        return f"{index} " + " ".join(["hello"] * max(self.input_len - 1, 0))

    def body(self, index: int) -> dict:
        return {
            "model": self.model, "prompt": self.prompt(index), "max_tokens": self.output_len,
            "temperature": 0.0, "stream": True, "ignore_eos": True,  # vLLM: exact lengths
            "stream_options": {"include_usage": True},
        }  # fmt: skip


def _one(spec: LoadSpec, index: int, t0: float) -> RequestResult:
    parts = urlsplit(spec.base_url)
    conn_cls = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    start = time.perf_counter()
    result = RequestResult(index=index, start_s=start - t0)
    conn = conn_cls(parts.netloc, timeout=spec.timeout_s)
    last = None
    done = False
    try:
        conn.request("POST", parts.path + "/v1/completions", body=json.dumps(spec.body(index)),
                     headers={"Content-Type": "application/json",
                              **client.auth_headers(spec.api_key)})  # fmt: skip
        resp = conn.getresponse()
        if resp.status != 200:
            text = resp.read(300).decode(errors="replace")
            result.error = f"HTTP {resp.status}: {text.strip()[:200]}"
            return result
        for raw in resp:  # the SSE stream, line by line
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            chunk = json.loads(payload)
            if "error" in chunk:
                err = chunk["error"]
                result.error = "server error: " + str(err.get("message", err))[:200]
                return result
            now = time.perf_counter()
            if chunk.get("choices") and any(c.get("text") for c in chunk["choices"]):
                if result.ttft_s is None:
                    result.ttft_s = now - start
                else:
                    result.itls_s.append(now - last)
                last = now
            if usage := chunk.get("usage"):
                result.prompt_tokens = usage.get("prompt_tokens")
                result.output_tokens = usage.get("completion_tokens")
        if not done:
            result.error = "the stream ended before data: [DONE] (server closed the connection)"
            return result
        result.e2el_s = time.perf_counter() - start
        if result.output_tokens is None:  # no usage chunk: one token per chunk
            result.output_tokens = len(result.itls_s) + (1 if result.ttft_s is not None else 0)
    except (OSError, http.client.HTTPException) as exc:
        result.error = f"{type(exc).__name__}: {exc}"[:200] or type(exc).__name__
    except ValueError as exc:
        result.error = f"bad stream chunk: {exc}"[:200]
    finally:
        conn.close()
    return result


def run_load(
    spec: LoadSpec, progress: Callable[[int, int], None] | None = None
) -> list[RequestResult]:
    """Send ``spec.num_requests`` streaming requests, ``spec.concurrency`` at a time."""
    t0 = time.perf_counter()
    done = 0
    lock = threading.Lock()

    def task(i: int) -> RequestResult:
        nonlocal done
        r = _one(spec, i, t0)
        with lock:
            done += 1
            if progress:
                progress(done, spec.num_requests)
        return r

    with ThreadPoolExecutor(max_workers=max(1, spec.concurrency)) as pool:
        return list(pool.map(task, range(spec.num_requests)))


def summarize(results: list[RequestResult], duration_s: float) -> dict:
    """Mean/median/p99 of TTFT, TPOT, ITL, E2EL in ms and throughput, like the bench JSON."""
    ok = [r for r in results if r.ok]
    out: dict = {"completed": len(ok), "failed": len(results) - len(ok)}
    series = {
        "ttft": [r.ttft_s for r in ok if r.ttft_s is not None],
        "tpot": [r.tpot_s for r in ok if r.tpot_s is not None],
        "itl": [x for r in ok for x in r.itls_s],
        "e2el": [r.e2el_s for r in ok if r.e2el_s is not None],
    }
    for name, values in series.items():
        values = sorted(v * 1000.0 for v in values)
        out[f"mean_{name}_ms"] = statistics.fmean(values) if values else None
        out[f"median_{name}_ms"] = statistics.median(values) if values else None
        out[f"p99_{name}_ms"] = percentile(values, 99) if values else None
    tokens = sum(r.output_tokens or 0 for r in ok)
    out["output_throughput"] = tokens / duration_s if duration_s > 0 else None
    out["request_throughput"] = len(ok) / duration_s if duration_s > 0 else None
    return out
