"""A real HTTP server speaking an SGLang server's endpoints, for collector tests.

Target: SGLang as stored in the search corpus (sgl-project/sglang; bench_serving.py at
0033168f, metrics/collector.py at 00ae9c15). Shapes, with their source files:
- ``GET /get_server_info`` -> the ``ServerArgs`` fields (``model_path``, ``tp_size``,
  ``dp_size``, ``ep_size``, ``pp_size``, ``enable_dp_attention``, ``moe_a2a_backend``, ...),
  scheduler ``internal_states`` (``avg_spec_accept_length``) and ``version``
  (python/sglang/srt/entrypoints/http_server.py ``get_server_info``).
- ``GET /get_model_info`` -> ``{"model_path", "tokenizer_path", "is_generation"}``.
- ``GET /v1/models`` -> ``{"object": "list", "data": [{"id", "object": "model", "created",
  "owned_by": "sglang", "root", "max_model_len"}]}``.
- ``POST /v1/completions`` with ``stream: true`` -> SSE ``data:`` chunks ``{id, object:
  "text_completion", created, model, choices[{index, text, logprobs, finish_reason,
  matched_stop}], usage: null}``, a usage chunk with ``stream_options.include_usage``, then
  ``data: [DONE]`` (python/sglang/srt/entrypoints/openai/serving_completions.py).
- ``POST /start_profile`` with a ``ProfileReqInput`` JSON body (``output_dir``,
  ``num_steps``, ``activities``) -> 200 ``Start profiling.\\n``; ``POST /stop_profile`` ->
  200 ``Stop profiling. This will take some time.\\n``; then each TP rank writes
  ``{profile_id}-TP-{rank}.trace.json.gz`` into ``output_dir``, gzipped straight into the
  final name in pieces (scheduler_profiler_mixin.py at 034c23fa, ``stop_profile``:
  ``export_chrome_trace(profile_id + f"-TP-{tp_rank}" + ".trace.json.gz")``, one
  ``profile_id`` for every rank). With ``num_steps`` the ranks stop by themselves after
  that many forward steps (``profiler_target_forward_ct``).
- ``POST /start_expert_distribution_record``, ``/stop_expert_distribution_record``,
  ``/dump_expert_distribution_record`` -> 200 text (python/sglang/srt/entrypoints/
  http_server.py); only with ``--expert-distribution-recorder-mode`` (cfg
  ``recorder_mode``, reported in ``/get_server_info``), else 400 as the recorder raises.
  The dump writes cfg ``recorder_files`` (dumps built in SGLang's format, collector tests)
  into ``recorder_dir`` as ``expert_distribution_recorder_{time}[_{rank}].pt``
  (eplb/expert_distribution.py ``_dump_to_file``), one rank after another; only when a
  recording was started and stopped (records between start and dump otherwise).
- ``GET /metrics`` -> prometheus_client text of ``sglang:*`` families with labels
  ``engine_type``, ``model_name``, ``pp_rank``, ``tp_rank`` (python/sglang/srt/metrics/
  collector.py: ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``,
  ``sglang:token_usage``, ``sglang:gen_throughput``, ``sglang:cache_hit_rate``,
  ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
  ``sglang:num_requests_total``, ``sglang:time_to_first_token_seconds``,
  ``sglang:inter_token_latency_seconds``, ``sglang:e2e_request_latency_seconds``).

Run: ``python -m tests.sglang.server CONFIG_JSON``; prints ``PORT <n>`` when listening.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.vllm.server import (
    E2E_BUCKETS,
    ITL_BUCKETS,
    TTFT_BUCKETS,
    Histogram,
    QuietServer,
    go_float,
    write_in_pieces,
)


class State:
    def __init__(self, cfg: dict) -> None:
        self.cfg, self.lock, self.created = cfg, threading.Lock(), time.time()
        self.running = self.prompt_tokens = self.generation_tokens = self.requests = 0
        self.hist = {"sglang:time_to_first_token_seconds": Histogram(TTFT_BUCKETS),
                     "sglang:inter_token_latency_seconds": Histogram(ITL_BUCKETS),
                     "sglang:e2e_request_latency_seconds": Histogram(E2E_BUCKETS)}  # fmt: skip
        self.profile: dict | None = None  # the running profile's request body
        self.steps = 0
        self.recorded = ""  # expert distribution recorder: "" | started | stopped

    def server_info(self) -> dict:
        c = self.cfg
        return {"model_path": c["model"], "tokenizer_path": c["model"], "tp_size": c.get("tp", 1),
                "dp_size": c.get("dp", 1), "ep_size": c.get("ep", 1), "pp_size": 1,
                "enable_dp_attention": c.get("dp_attention", False),
                "moe_a2a_backend": c.get("a2a", "none"), "kv_cache_dtype": "auto",
                "quantization": None, "port": 30000, "enable_metrics": True,
                "internal_states": [{"avg_spec_accept_length": c.get("accept_length"),
                                     "last_gen_throughput": 0.0}],
                "version": c.get("version", "0.5.4"),
                "expert_distribution_recorder_mode": c.get("recorder_mode"),
                **c.get("extra_info", {})}  # fmt: skip

    def metrics_text(self) -> str:
        if self.cfg.get("metrics_file"):  # a real server's recorded exposition, verbatim
            return Path(self.cfg["metrics_file"]).read_text()
        labels = (f'engine_type="unified",model_name="{self.cfg["model"]}",pp_rank="0",'
                  'tp_rank="0"')  # fmt: skip
        out: list[str] = []

        def one(name: str, kind: str, value: float) -> None:
            out.extend([f"# HELP {name} {name}.", f"# TYPE {name} {kind}",
                        f"{name}{{{labels}}} {go_float(value)}"])  # fmt: skip

        with self.lock:
            one("sglang:num_running_reqs", "gauge", self.running)
            one("sglang:num_queue_reqs", "gauge", 0)
            one("sglang:token_usage", "gauge", min(1.0, 0.04 * self.running))
            one("sglang:gen_throughput", "gauge", 100.0 * self.running)
            one("sglang:cache_hit_rate", "gauge", 0.25)
            for name, v in (("sglang:prompt_tokens", self.prompt_tokens),
                            ("sglang:generation_tokens", self.generation_tokens),
                            ("sglang:num_requests", self.requests)):  # fmt: skip
                out.extend([f"# HELP {name}_total {name}.", f"# TYPE {name}_total counter",
                            f"{name}_total{{{labels}}} {go_float(v)}",
                            f"# HELP {name}_created {name}.", f"# TYPE {name}_created gauge",
                            f"{name}_created{{{labels}}} {go_float(self.created)}"])  # fmt: skip
            for name, h in self.hist.items():
                out.extend([f"# HELP {name} {name}.", f"# TYPE {name} histogram"])
                cum = 0
                for le, n in zip(h.buckets, h.counts, strict=True):
                    cum += n
                    out.append(f'{name}_bucket{{{labels},le="{go_float(le)}"}} {go_float(cum)}')
                out.append(f"{name}_count{{{labels}}} {go_float(cum)}")
                out.append(f"{name}_sum{{{labels}}} {go_float(h.sum)}")
        return "\n".join(out) + "\n"

    def step(self) -> None:
        """One forward step while profiling; with num_steps the ranks stop by themselves."""
        with self.lock:
            if self.profile is None:
                return
            self.steps += 1
            if self.profile.get("num_steps") and self.steps >= self.profile["num_steps"]:
                self._stop_locked()

    def stop(self) -> None:
        with self.lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        body, self.profile = self.profile, None
        if body is not None:
            threading.Thread(target=self.export, args=(body,), daemon=True).start()

    def export(self, body: dict) -> None:
        """Each TP rank gzips its trace straight into ``{profile_id}-TP-{rank}.trace.json.gz``."""
        delay = self.cfg.get("flush_delay_s", 0.5)
        if "CUDA_PROFILER" in (body.get("activities") or []) and self.cfg.get("nsys_report"):
            # the base GPU's cudaProfilerStop ends nsys's capture range: nsys writes its report
            write_in_pieces(Path(self.cfg["nsys_source"]), Path(self.cfg["nsys_report"]), delay)
        if not {"CPU", "GPU"} & set(body.get("activities") or ["CPU", "GPU"]):
            return
        out = Path(body.get("output_dir") or self.cfg["trace_dir"])
        profile_id = str(time.time())
        for rank, src in enumerate(self.cfg.get("trace_sources", [])):
            data = Path(src).read_bytes()
            with (out / f"{profile_id}-TP-{rank}.trace.json.gz").open("wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                time.sleep(delay)
                f.write(data[len(data) // 2 :])


def make_handler(state: State):
    cfg = state.cfg

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a) -> None:
            pass

        def _body(self, data: bytes, status: int = 200, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, obj, status: int = 200) -> None:
            self._body(json.dumps(obj).encode(), status)

        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):  # one handler for both upstream
                return self._body(b"", cfg.get("health", 200), ctype="text/plain")
            if self.path in ("/get_server_info", "/server_info"):
                return self._json(state.server_info())
            if self.path == "/get_model_info":
                return self._json({"model_path": cfg["model"], "tokenizer_path": cfg["model"],
                                   "is_generation": True})  # fmt: skip
            if self.path == "/v1/models":
                return self._json({"object": "list", "data": [{
                    "id": cfg["model"], "object": "model", "created": int(state.created),
                    "owned_by": "sglang", "root": cfg["model"], "max_model_len": 32768}]})  # fmt: skip
            if self.path == "/metrics" and cfg.get("metrics", True):
                return self._body(state.metrics_text().encode(), ctype="text/plain; "
                                  "version=0.0.4; charset=utf-8")  # fmt: skip
            return self._json({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            if self.path == "/start_profile":
                with state.lock:
                    state.profile, state.steps = (json.loads(raw) if raw else {}), 0
                return self._body(b"Start profiling.\n", ctype="text/plain")
            if self.path == "/stop_profile":
                state.stop()
                return self._body(b"Stop profiling. This will take some time.\n",
                                  ctype="text/plain")  # fmt: skip
            if self.path.endswith("_expert_distribution_record"):
                return self._recorder(self.path.strip("/").split("_", 1)[0])
            if self.path == "/v1/completions":
                return self._complete(json.loads(raw))
            return self._json({"detail": "Not Found"}, 404)

        def _complete(self, req: dict) -> None:
            n_out, n_in = int(req.get("max_tokens") or 16), len(str(req.get("prompt")).split())
            rid, created = f"{time.time_ns():x}", int(time.time())
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            with state.lock:
                state.running += 1
            start = last = time.monotonic()
            for i in range(n_out):
                time.sleep(cfg.get("token_delay_s", 0.002))
                state.step()
                now = time.monotonic()
                with state.lock:
                    key = ("sglang:time_to_first_token_seconds" if i == 0
                           else "sglang:inter_token_latency_seconds")  # fmt: skip
                    state.hist[key].observe(now - (start if i == 0 else last))
                    state.generation_tokens += 1
                last = now
                self._send({"id": rid, "object": "text_completion", "created": created,
                            "model": cfg["model"], "choices": [{
                                "index": 0, "text": " tok", "logprobs": None,
                                "finish_reason": "length" if i == n_out - 1 else None,
                                "matched_stop": None}], "usage": None})  # fmt: skip
            if (req.get("stream_options") or {}).get("include_usage"):
                self._send({"id": rid, "object": "text_completion", "created": created,
                            "model": cfg["model"], "choices": [], "usage": {
                                "prompt_tokens": n_in, "completion_tokens": n_out,
                                "total_tokens": n_in + n_out}})  # fmt: skip
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            with state.lock:
                state.running -= 1
                state.prompt_tokens += n_in
                state.requests += 1
                state.hist["sglang:e2e_request_latency_seconds"].observe(time.monotonic() - start)

        def _recorder(self, what: str) -> None:
            if not cfg.get("recorder_mode"):  # the no-op recorder raises; FastAPI answers 500
                return self._body(b"Please set ServerArgs.expert_distribution_recorder_mode to "
                                  b"use ExpertDistributionRecorder.", 500, "text/plain")  # fmt: skip
            with state.lock:
                state.recorded = {"start": "started", "stop": "stopped"}.get(what, state.recorded)
                dump = what == "dump" and state.recorded == "stopped"
            if dump:
                stamp = time.time()
                for i, src in enumerate(cfg.get("recorder_files", [])):
                    name = (f"expert_distribution_recorder_{stamp}_{i}.pt"
                            if len(cfg["recorder_files"]) > 1 else
                            f"expert_distribution_recorder_{stamp}.pt")  # fmt: skip
                    out = Path(cfg["recorder_dir"]) / name
                    out.write_bytes(Path(src).read_bytes())
                    time.sleep(cfg.get("dump_delay_s", 0.2))
            words = {"start": "Start recording the expert distribution.",
                     "stop": "Stop recording the expert distribution.",
                     "dump": "Dump expert distribution record."}[what]  # fmt: skip
            self._body(f"{words}\n".encode(), ctype="text/plain")

        def _send(self, obj: dict) -> None:
            self._chunk(f"data: {json.dumps(obj)}\n\n".encode())

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    server = QuietServer(("127.0.0.1", 0), make_handler(State(cfg)))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
