"""``vllm-profile``: profile a running vLLM server under a short synthetic load.

Reads ``/version`` and ``/v1/models``; ``POST /start_profile``; drives N streaming
completions at concurrency c (TTFT/ITL measured on the client); ``POST /stop_profile``;
waits until every rank's trace file in ``--trace-dir`` is final; ingests them as one trace
run together with the load and the server's model, version and parallel layout.
Routes as in vllm/entrypoints/serve/profile/api_router.py: both return 200 with an empty
body, and are only mounted when a profiler is configured (404 otherwise).

With the CUDA profiler (``--profiler-config '{"profiler":"cuda"}'``: vllm/profiler/wrapper.py
``CudaProfilerWrapper`` calls cudaProfilerStart/Stop, and names each step with an NVTX
range) under ``nsys profile --capture-range=cudaProfilerApi``, as vLLM's profiling guide
(docs/contributing/profiling.md) runs it, ``--nsys-report`` names the report nsys writes
once the range ends: it is waited for and ingested instead of torch traces.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import InputError, MeasurementError
from collectors.serving import client, load, model_config, orchestrate
from collectors.serving.layout import parse_server_args
from collectors.serving.vllm import layout as layout_mod


def add_arguments(parser: argparse.ArgumentParser) -> None:
    model_config.add_model_dir_argument(parser)
    parser.add_argument("--url", required=True, help="the vLLM server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--trace-dir", type=Path,
                        help="the server's torch_profiler_dir, as seen from this machine "
                        "(not with --nsys-report)")  # fmt: skip
    orchestrate.add_nsys_argument(parser)
    parser.add_argument("--model", help="served model name (default: the server's first model)")
    parser.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY"),
                        help="the server's --api-key (default: $VLLM_API_KEY)")  # fmt: skip
    orchestrate.add_load_arguments(parser)
    w = orchestrate.add_trace_file_arguments(parser)
    w.add_argument("--no-trace-grace", type=float, default=30.0, metavar="S",
                   help="fail when no trace file at all appeared S seconds after a successful "
                   "/stop_profile (a CUDA/nsys profiler writes none; default 30)")  # fmt: skip
    parser.add_argument("--server-args",
                        help="the `vllm serve` command line, e.g. \"-tp 8 --enable-expert-parallel\"")  # fmt: skip


def server_models(base: str, api_key: str | None) -> tuple[str | None, list[dict]]:
    """The server's version and served models; one line when nothing or no vLLM answers."""
    try:
        version = client.get_json(f"{base}/version").get("version")
        models = client.get_json(f"{base}/v1/models", api_key=api_key).get("data") or []
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"vLLM server down? {exc}") from None
    except (client.HttpStatus, AttributeError) as exc:  # AttributeError: not a JSON object
        if isinstance(exc, client.HttpStatus) and exc.status == 401:
            raise InputError(f"--api-key: {base} wants its API key (HTTP 401 on /v1/models); "
                             "pass --api-key or set VLLM_API_KEY") from None  # fmt: skip
        raise MeasurementError(f"{base} does not answer like a vLLM server: {exc}") from None
    return (str(version) if version else None), models


def _server_facts(base: str, model_arg: str | None, api_key: str | None) -> tuple[str | None, dict]:
    version, models = server_models(base, api_key)
    card = next((m for m in models if m.get("id") == model_arg), None) if model_arg else None
    if model_arg and card is None:
        ids = ", ".join(m.get("id", "?") for m in models)
        raise InputError(f"--model {model_arg}: not served by {base} (it serves: {ids})")
    card = card or (models[0] if models else None)
    if not card:
        raise MeasurementError(f"{base}/v1/models lists no model")
    return version, card


def _server_info(base: str) -> dict | None:
    try:  # only with VLLM_SERVER_DEV_MODE=1; quietly absent otherwise
        info = client.get_json(f"{base}/server_info?config_format=json", timeout=5.0)
    except (client.ServerUnreachable, client.HttpStatus):
        return None
    return info if isinstance(info, dict) else None


# vLLM's CUDA profiler (ProfilerConfig profiler="cuda": vllm/profiler/wrapper.py
# CudaProfilerWrapper, cudaProfilerStart/Stop for nsys) mounts the same routes but writes
# no torch trace into any folder. The torch one (TorchProfilerWrapper) exports inside
# stop(), before /stop_profile answers; it writes nothing when it never ran, i.e. when
# the load ended before its delay_iterations.
_CUDA_WHY = ("; a server started with the CUDA (nsys) profiler (--profiler-config "
             "'{\"profiler\":\"cuda\"}') mounts /start_profile and /stop_profile but writes no "
             "torch trace: pass --nsys-report with the report nsys writes, or restart it with "
             "the torch profiler (or, with delay_iterations in its profiler config, send more "
             "requests than that delay)")  # fmt: skip


_NSYS_HINT = ("restart it as `nsys profile --trace-fork-before-exec=true --cuda-graph-trace=node "
              "--capture-range=cudaProfilerApi --capture-range-end=repeat -o NAME vllm serve "
              "... --profiler-config '{\"profiler\":\"cuda\"}'` (vLLM's profiling guide)")  # fmt: skip


def _post(base: str, path: str, timeout: float, version: str | None, args: argparse.Namespace
          ) -> None:  # fmt: skip
    try:
        client.request(f"{base}{path}", method="POST", timeout=timeout)
    except client.HttpStatus as exc:
        if exc.status == 404:
            hint = (_NSYS_HINT if args.nsys_report is not None
                    else layout_mod.profiler_hint(version, str(args.trace_dir)))  # fmt: skip
            raise InputError(
                f"{base}: the profiler is not enabled on this vLLM {version or '(unknown version)'}"
                f" server (POST {path} returned 404); {hint}"
            ) from None
        raise MeasurementError(str(exc)) from None
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"vLLM server down? {exc}") from None


def run(args: argparse.Namespace, ctx: Context) -> int:
    base = orchestrate.check_load_args(args)
    log = ctx.log
    api_key, args.api_key = args.api_key, None  # a secret: never recorded with the run's args
    args.server_args = layout_mod.redact(args.server_args)  # stored with the run
    version, card = _server_facts(base, args.model, api_key)
    model = card["id"]
    info = _server_info(base)
    kind = layout_mod.profiler_kind(args.server_args, info)
    if kind == "cuda" and args.nsys_report is None:
        raise InputError(
            f"{base}: its profiler is the CUDA one (nsys), which writes no torch trace into "
            f"{args.trace_dir}: pass --nsys-report with the report `nsys profile -o` writes "
            f"(docs/nsys.md), or {layout_mod.profiler_hint(version, str(args.trace_dir))}"
        )
    if args.nsys_report is not None and kind == "torch":
        log.warning(f"{base}: its profiler is the torch one, which calls no "
                    "cudaProfilerStart for nsys --capture-range=cudaProfilerApi; waiting for "
                    f"{args.nsys_report} anyway")  # fmt: skip
    layout = (parse_server_args(layout_mod.from_server_args, args.server_args)
              or layout_mod.from_server_info(info))  # fmt: skip
    log.info(f"{base}: vLLM {version}, model {model}, layout "
             f"{layout.name if layout else 'unknown (pass --server-args)'}")  # fmt: skip
    spec = load.LoadSpec(base, model, args.num_requests, args.concurrency, args.input_len,
                         args.output_len, args.request_timeout, api_key)  # fmt: skip
    plan = orchestrate.ProfilePlan(
        spec=spec, warmup=args.warmup, trace_dir=args.trace_dir,
        expected=layout.world_size if layout else None, flush_timeout_s=args.flush_timeout,
        settle_s=args.settle,
        start=lambda: _post(base, "/start_profile", 60.0, version, args),
        stop=lambda: _post(base, "/stop_profile", args.flush_timeout, version, args),
        # vLLM's /stop_profile returns once the workers exported: nothing at all by then
        # (plus grace for a slow shared filesystem) means no torch trace is coming.
        empty_grace_s=args.no_trace_grace, empty_why=_CUDA_WHY, report=args.nsys_report,
    )  # fmt: skip
    out = orchestrate.run_profile(plan, log)
    layout = layout or layout_mod.from_trace_names([f.name for f in out.files])
    lay = layout or layout_mod.Layout()
    server = {
        "url": base, "model_id": card.get("id"), "model_root": card.get("root"),
        "max_model_len": card.get("max_model_len"), "vllm_version": version, **lay.row(),
        "all2all_backend": lay.all2all_backend, "kv_cache_dtype": lay.kv_cache_dtype,
        "quantization": lay.quantization, "server_args": args.server_args,
        "trace_dir": str(args.nsys_report or args.trace_dir), "trace_files": len(out.files),
        "flush_wait_s": out.waited_s, "num_requests": args.num_requests,
        "concurrency": args.concurrency, "input_len": args.input_len,
        "output_len": args.output_len,
    }  # fmt: skip
    summary = {"url": base, "model": card.get("id"), "vllm_version": version,
               "layout": lay.name}  # fmt: skip
    return orchestrate.commit_profile(ctx, "vllm-profile", "vllm", version, "vllm_server",
                                      server, out, summary, model_dir=args.model_dir)  # fmt: skip
