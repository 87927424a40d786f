"""A real HTTP server speaking the vLLM OpenAI server's endpoints, for collector tests.

Target: vLLM 0.16 / main as stored in the search corpus (vllm-project/vllm). Shapes, with
their source files:
- ``GET /version`` -> ``{"version": "..."}``
  (vllm/frontend/entrypoints/serve/instrumentator/basic.py ``show_version``).
- ``GET /v1/models`` -> ``ModelList``: ``{"object":"list","data":[ModelCard]}`` with
  ``id, object="model", created, owned_by="vllm", root, parent, max_model_len, permission``
  (vllm/entrypoints/openai/protocol.py ``ModelCard``/``ModelList``).
- ``POST /start_profile``, ``POST /stop_profile`` -> 200, empty body; the routes are only
  mounted when a profiler is configured, else FastAPI's 404 ``{"detail":"Not Found"}``
  (vllm/frontend/entrypoints/serve/profile/api_router.py ``attach_router``).
- ``POST /v1/completions`` with ``stream: true`` -> SSE ``data: <CompletionStreamResponse>``
  lines (``id, object="text_completion", created, model, choices[{index, text, logprobs,
  finish_reason, stop_reason, prompt_token_ids, token_ids}], usage``), a final usage-only
  chunk (``choices: []``) when ``stream_options.include_usage``, then ``data: [DONE]``
  (vllm/entrypoints/openai/serving_completion.py ``completion_stream_generator``).
- ``GET /metrics`` -> Prometheus text as ``prometheus_client.generate_latest`` writes it
  (HELP/TYPE lines, counters as ``name_total`` plus ``name_created``, labels sorted,
  histogram ``_bucket{le=...}``/``_count``/``_sum``); metric names and buckets from
  vllm/v1/metrics/loggers.py ``PrometheusStatLogger`` (labels ``engine``, ``model_name``).
- ``GET /server_info?config_format=json`` (only with VLLM_SERVER_DEV_MODE=1) ->
  ``{"vllm_config": {...}, "vllm_env": {...}, "system_env": {...}}``
  (vllm/entrypoints/serve/instrumentator/server_info.py).

On ``/stop_profile`` it writes one trace file per rank into its trace dir, named like
vLLM's (``dp0_pp0_tp{r}_dcp0_ep0_rank{r}.<ns>.pt.trace.json.gz``), first as ``<name>.tmp``
written in pieces, renamed after ``flush_delay_s`` (never, with ``stay_tmp``). With
``gz_direct`` it writes the gzip stream straight into the final name in pieces instead, as
PyTorch's ``export_chrome_trace`` does for a ``.gz`` path (torch/profiler/profiler.py: the
JSON goes to a temporary file, then ``gzip.open(path, "wb")`` on the final name). The trace
contents are real torch.profiler traces given as ``trace_sources``. A server "run under
nsys" (``nsys_report``: vLLM's CUDA profiler, vllm/profiler/wrapper.py
``CudaProfilerWrapper``) writes no trace but, once profiling stops, the Nsight Systems
report ``nsys_source`` at ``nsys_report``, as nsys does when its capture range ends.

Run: ``python -m tests.vllm.server CONFIG_JSON``; prints ``PORT <n>`` when listening.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]  # fmt: skip
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0]  # fmt: skip
E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]  # fmt: skip


def go_float(v: float) -> str:
    """prometheus_client.utils.floatToGoString."""
    if v == float("inf"):
        return "+Inf"
    if v == float("-inf"):
        return "-Inf"
    if v != v:
        return "NaN"
    return repr(float(v))


class Histogram:
    def __init__(self, buckets: list[float]) -> None:
        self.buckets = [*buckets, float("inf")]
        self.counts = [0] * len(self.buckets)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.sum += v
        for i, le in enumerate(self.buckets):
            if v <= le:
                self.counts[i] += 1
                break


class State:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.lock = threading.Lock()
        self.created = time.time()
        self.running = 0
        self.chunks_served = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = 0
        self.hist = {
            "vllm:time_to_first_token_seconds": Histogram(TTFT_BUCKETS),
            "vllm:inter_token_latency_seconds": Histogram(ITL_BUCKETS),
            "vllm:request_time_per_output_token_seconds": Histogram(ITL_BUCKETS),
            "vllm:e2e_request_latency_seconds": Histogram(E2E_BUCKETS),
        }
        self.profiling = False

    def metrics_text(self) -> str:
        if self.cfg.get("metrics_file"):  # a real server's recorded exposition, verbatim
            return Path(self.cfg["metrics_file"]).read_text()
        model = self.cfg["model"]
        lab = f'engine="0",model_name="{model}"'
        out: list[str] = []

        def gauge(name: str, doc: str, value: float) -> None:
            out.extend([f"# HELP {name} {doc}", f"# TYPE {name} gauge",
                        f"{name}{{{lab}}} {go_float(value)}"])  # fmt: skip

        def counter(name: str, doc: str, value: float, extra: str = "") -> None:
            labels = lab if not extra else f"{lab},{extra}"
            labels = ",".join(sorted(labels.split(",")))
            out.extend([f"# HELP {name}_total {doc}", f"# TYPE {name}_total counter",
                        f"{name}_total{{{labels}}} {go_float(value)}",
                        f"# HELP {name}_created {doc}", f"# TYPE {name}_created gauge",
                        f"{name}_created{{{labels}}} {go_float(self.created)}"])  # fmt: skip

        with self.lock:
            gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                  self.running)  # fmt: skip
            gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", 0)
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                  min(1.0, 0.05 * self.running))  # fmt: skip
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                    self.prompt_tokens)  # fmt: skip
            counter("vllm:generation_tokens", "Number of generation tokens processed.",
                    self.generation_tokens)  # fmt: skip
            counter("vllm:request_success", "Count of successfully processed requests.",
                    self.success, 'finished_reason="length"')  # fmt: skip
            for name, h in self.hist.items():
                out.extend([f"# HELP {name} Histogram of {name}.", f"# TYPE {name} histogram"])
                cumulative = 0
                for le, c in zip(h.buckets, h.counts, strict=True):
                    cumulative += c
                    out.append(f'{name}_bucket{{engine="0",le="{go_float(le)}",'
                               f'model_name="{model}"}} {go_float(cumulative)}')  # fmt: skip
                out.append(f"{name}_count{{{lab}}} {go_float(cumulative)}")
                out.append(f"{name}_sum{{{lab}}} {go_float(h.sum)}")
                out.extend([f"# HELP {name}_created Histogram of {name}.",
                            f"# TYPE {name}_created gauge",
                            f"{name}_created{{{lab}}} {go_float(self.created)}"])  # fmt: skip
        out.extend(["# HELP python_gc_objects_collected_total Objects collected during gc",
                    "# TYPE python_gc_objects_collected_total counter",
                    'python_gc_objects_collected_total{generation="0"} 1234.0'])  # fmt: skip
        return "\n".join(out) + "\n"

    def flush_traces(self) -> None:
        """Write every rank's trace as <name>.tmp in pieces, then rename (unless stay_tmp);
        under nsys (``nsys_report``), the report nsys writes when the capture range ends."""
        cfg = self.cfg
        if cfg.get("nsys_report"):
            write_in_pieces(Path(cfg["nsys_source"]), Path(cfg["nsys_report"]),
                            cfg.get("flush_delay_s", 0.5))  # fmt: skip
            return
        out_dir = Path(cfg["trace_dir"])
        ns = time.time_ns()
        names = []
        for rank, src in enumerate(cfg.get("trace_sources", [])):
            name = f"dp0_pp0_tp{rank}_dcp0_ep0_rank{rank}.{ns}.pt.trace.json.gz"
            tmp = out_dir / (name if cfg.get("gz_direct") else name + ".tmp")
            data = Path(src).read_bytes()
            with tmp.open("wb") as f:
                half = len(data) // 2
                f.write(data[:half])
                f.flush()
                time.sleep(cfg.get("flush_delay_s", 0.5) / 2)
                f.write(data[half:])
            names.append((tmp, out_dir / name))
        time.sleep(cfg.get("flush_delay_s", 0.5) / 2)
        if not cfg.get("stay_tmp") and not cfg.get("gz_direct"):
            for tmp, final in names:
                os.rename(tmp, final)


def write_in_pieces(source: Path, target: Path, delay_s: float) -> None:
    """``target`` written as a file being finalized is: half, a pause, the rest."""
    data = source.read_bytes()
    with target.open("wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep(delay_s)
        f.write(data[len(data) // 2 :])


def make_handler(state: State):
    cfg = state.cfg

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a) -> None:  # keep test output quiet
            pass

        def _json(self, obj, status: int = 200) -> None:
            body = json.dumps(obj, separators=(",", ":")).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _empty(self, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _unauthorized(self) -> bool:
            """vllm/entrypoints/serve/middleware/authenticate.py: /v1 routes need the key."""
            key = cfg.get("api_key")
            if not key or not self.path.startswith("/v1"):
                return False
            if self.headers.get("Authorization") == f"Bearer {key}":
                return False
            self._json({"error": "Unauthorized"}, 401)
            return True

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if self._unauthorized():
                return None
            if path == "/version":
                return self._json({"version": cfg["version"]})
            if path == "/v1/models":
                return self._json({"object": "list", "data": [{
                    "id": cfg["model"], "object": "model", "created": int(state.created),
                    "owned_by": "vllm", "root": cfg.get("root", cfg["model"]), "parent": None,
                    "max_model_len": cfg.get("max_model_len", 8192), "permission": [{
                        "id": "modelperm-0", "object": "model_permission",
                        "created": int(state.created), "allow_create_engine": False,
                        "allow_sampling": True, "allow_logprobs": True,
                        "allow_search_indices": False, "allow_view": True,
                        "allow_fine_tuning": False, "organization": "*", "group": None,
                        "is_blocking": False}]}]})  # fmt: skip
            if path == "/metrics":
                body = state.metrics_text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
            if path == "/server_info" and cfg.get("server_info"):
                return self._json({"vllm_config": cfg["server_info"], "vllm_env": {},
                                   "system_env": {}})  # fmt: skip
            return self._json({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self._unauthorized():
                return None
            if self.path in ("/start_profile", "/stop_profile"):
                if not cfg.get("profiler"):
                    return self._json({"detail": "Not Found"}, 404)
                if self.path == "/start_profile":
                    state.profiling = True
                else:
                    state.profiling = False
                    threading.Thread(target=state.flush_traces, daemon=True).start()
                return self._empty()
            if self.path == "/v1/completions":
                return self._complete(json.loads(raw))
            return self._json({"detail": "Not Found"}, 404)

        def _complete(self, req: dict) -> None:
            if req.get("model") != cfg["model"]:
                return self._json({"error": {"message": f"The model `{req.get('model')}` does "
                                   "not exist.", "type": "NotFoundError", "param": "model",
                                   "code": 404}}, 404)  # fmt: skip
            n_out = int(req.get("max_tokens") or 16)
            n_in = len(str(req.get("prompt", "")).split())
            rid, created = f"cmpl-{time.time_ns():x}", int(time.time())
            delay = cfg.get("token_delay_s", 0.002)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            with state.lock:
                state.running += 1
            start = last = time.monotonic()
            try:
                for i in range(n_out):
                    time.sleep(delay)
                    self._maybe_die()
                    now = time.monotonic()
                    with state.lock:
                        key = ("vllm:time_to_first_token_seconds" if i == 0
                               else "vllm:inter_token_latency_seconds")  # fmt: skip
                        state.hist[key].observe(now - (start if i == 0 else last))
                        state.generation_tokens += 1
                    last = now
                    self._send({"id": rid, "object": "text_completion", "created": created,
                                "model": cfg["model"], "choices": [{
                                    "index": 0, "text": " tok", "logprobs": None,
                                    "finish_reason": "length" if i == n_out - 1 else None,
                                    "stop_reason": None, "prompt_token_ids": None,
                                    "token_ids": None}], "usage": None})  # fmt: skip
                if (req.get("stream_options") or {}).get("include_usage"):
                    self._send({"id": rid, "object": "text_completion", "created": created,
                                "model": cfg["model"], "choices": [], "usage": {
                                    "prompt_tokens": n_in, "total_tokens": n_in + n_out,
                                    "completion_tokens": n_out}})  # fmt: skip
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
            finally:
                end = time.monotonic()
                with state.lock:
                    state.running -= 1
                    state.prompt_tokens += n_in
                    state.success += 1
                    state.hist["vllm:e2e_request_latency_seconds"].observe(end - start)
                    if n_out > 1:
                        state.hist["vllm:request_time_per_output_token_seconds"].observe(
                            (last - start) / n_out
                        )

        def _maybe_die(self) -> None:
            with state.lock:
                state.chunks_served += 1
                die = cfg.get("die_after_chunks")
                if die is not None and state.chunks_served >= die:
                    os._exit(3)  # the server process dies mid-stream, like a crashed engine

        def _send(self, obj: dict) -> None:
            self._chunk(f"data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode())

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # clients closing kept-alive connections is normal here


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    state = State(cfg)
    # "bind": "0.0.0.0" to be reached at this machine's non-loopback address too
    server = QuietServer((cfg.get("bind", "127.0.0.1"), cfg.get("port", 0)), make_handler(state))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
