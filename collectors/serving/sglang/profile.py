"""``sglang-profile``: profile a running SGLang server under a short streaming load.

Routes (python/sglang/srt/entrypoints/http_server.py, sgl-project/sglang): ``POST
/start_profile`` with a ``ProfileReqInput`` body (``output_dir``, ``num_steps``,
``activities`` such as ``["CPU", "GPU"]``; 200 ``Start profiling.``), ``POST
/stop_profile`` (200 ``Stop profiling. This will take some time.``). Every TP rank's
scheduler exports ``{profile_id}-TP-{rank}.trace.json.gz`` into ``output_dir``
(python/sglang/srt/managers/scheduler_profiler_mixin.py at sgl-project/sglang 034c23fa:
``torch_profiler.export_chrome_trace(...)``; newer releases add ``-DP-/-PP-/-EP-`` parts),
gzipped straight into the final name (no ``.tmp``), so a file is taken only once its gzip
stream is complete (collectors/serving/traces.py). With ``--num-steps`` the scheduler
stops by itself after that many forward steps, and a later ``/stop_profile`` would only
answer "Profiling is not in progress", so none is sent.
The load, the wait and the ingest are the same as vllm-profile's.

Under Nsight Systems: the ``CUDA_PROFILER`` activity makes the base-GPU rank call
``torch.cuda.cudart().cudaProfilerStart()`` / ``Stop()`` (scheduler_profiler_mixin.py
``start_profile``/``stop_profile``), which ``nsys profile --capture-range=cudaProfilerApi``
waits for; with ``--nsys-report`` that activity is the default and the report nsys writes
is ingested instead of torch traces.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import InputError, MeasurementError
from collectors.serving import client, load, model_config, orchestrate
from collectors.serving.layout import Layout, parse_server_args, redact
from collectors.serving.sglang import layout as sgl_layout
from collectors.serving.sglang import server

ACTIVITIES = ("CPU", "GPU", "MEM", "CUDA_PROFILER", "RPD")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    model_config.add_model_dir_argument(parser)
    parser.add_argument("--url", required=True, help="the SGLang server, e.g. http://127.0.0.1:30000")
    parser.add_argument("--trace-dir", type=Path,
                        help="where the traces land, as seen from this machine (not with "
                        "--nsys-report)")  # fmt: skip
    orchestrate.add_nsys_argument(parser)
    parser.add_argument("--output-dir",
                        help="output_dir sent to the server (default: --trace-dir)")  # fmt: skip
    parser.add_argument("--model", help="model to load (default: the server's)")
    parser.add_argument("--activities",
                        help="profiler activities (default CPU,GPU; CUDA_PROFILER with "
                        "--nsys-report)")  # fmt: skip
    parser.add_argument("--num-steps", type=int, default=None,
                        help="let the server stop after N forward steps (no /stop_profile)")  # fmt: skip
    orchestrate.add_load_arguments(parser)
    orchestrate.add_trace_file_arguments(parser)
    parser.add_argument("--server-args",
                        help="the `python -m sglang.launch_server` command line (default: "
                        "the server's /get_server_info)")  # fmt: skip


def _check_args(args: argparse.Namespace) -> tuple[str, list[str]]:
    base = orchestrate.check_load_args(args)
    if args.num_steps is not None and args.num_steps < 1:
        raise InputError("--num-steps: must be at least 1")
    nsys = args.nsys_report is not None
    if args.activities is None:
        args.activities = "CUDA_PROFILER" if nsys else "CPU,GPU"
    acts = [a.strip().upper() for a in args.activities.split(",") if a.strip()]
    bad = [a for a in acts if a not in ACTIVITIES]
    if bad or not acts:
        raise InputError(f"--activities {args.activities}: use some of {', '.join(ACTIVITIES)}")
    if nsys and "CUDA_PROFILER" not in acts:
        raise InputError(f"--activities {args.activities}: with --nsys-report, add CUDA_PROFILER "
                         "(its cudaProfilerStart/Stop open and close nsys's capture range)")  # fmt: skip
    if not nsys and not {"CPU", "GPU"} & set(acts):
        raise InputError(f"--activities {args.activities}: no CPU or GPU, so no torch trace "
                         "(with CUDA_PROFILER under nsys, pass --nsys-report)")  # fmt: skip
    return base, acts


def _post(base: str, path: str, body: dict | None, timeout: float) -> None:
    try:
        client.request(f"{base}{path}", method="POST", body=body, timeout=timeout)
    except client.HttpStatus as exc:
        raise MeasurementError(f"SGLang {path} failed: {exc}") from None
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"SGLang server down? {exc}") from None


def run(args: argparse.Namespace, ctx: Context) -> int:
    base, activities = _check_args(args)
    log = ctx.log
    args.server_args = redact(args.server_args)
    facts = server.facts(base)
    model = args.model or facts.model
    if not model:
        raise MeasurementError(f"{base}: /get_model_info and /v1/models name no model")
    layout = parse_server_args(sgl_layout.from_server_args, args.server_args) or facts.layout
    log.info(f"{base}: SGLang {facts.version}, model {model}, layout "
             f"{layout.name if layout else 'unknown (pass --server-args)'}")  # fmt: skip
    spec = load.LoadSpec(base, model, args.num_requests, args.concurrency, args.input_len,
                         args.output_len, args.request_timeout)  # fmt: skip
    body: dict = {"activities": activities}
    if args.output_dir or args.trace_dir:
        body["output_dir"] = args.output_dir or str(args.trace_dir)
    if args.num_steps:
        body["num_steps"] = args.num_steps
    plan = orchestrate.ProfilePlan(
        spec=spec, warmup=args.warmup, trace_dir=args.trace_dir,
        expected=layout.world_size if layout else None, flush_timeout_s=args.flush_timeout,
        settle_s=args.settle, start=lambda: _post(base, "/start_profile", body, 60.0),
        stop=None if args.num_steps else (
            lambda: _post(base, "/stop_profile", None, args.flush_timeout)),
        report=args.nsys_report,
    )  # fmt: skip
    out = orchestrate.run_profile(plan, log)
    lay = layout or Layout()
    prefix = out.files[0].name.split("-TP-")[0] if out.files and "-TP-" in out.files[0].name else None
    row = {
        "url": base, "model_id": model, "sglang_version": facts.version, **lay.row(),
        "server_args": args.server_args, "profile_id": prefix,
        "trace_dir": str(args.nsys_report or args.trace_dir),
        "trace_files": len(out.files), "flush_wait_s": out.waited_s,
        "num_requests": args.num_requests, "concurrency": args.concurrency,
        "input_len": args.input_len, "output_len": args.output_len,
    }  # fmt: skip
    summary = {"url": base, "model": model, "sglang_version": facts.version, "layout": lay.name}
    return orchestrate.commit_profile(ctx, "sglang-profile", "sglang", facts.version,
                                      "sglang_server", row, out, summary,
                                      model_dir=args.model_dir)  # fmt: skip
