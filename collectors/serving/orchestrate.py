"""Profile orchestration every engine shares: warm-up, start, load, stop, wait, ingest.

An engine adapter (collectors/vllm/profile.py, collectors/sglang/profile.py) supplies its
``/start_profile`` and ``/stop_profile`` calls, how many rank files to expect, and the row
describing the server; everything else happens here, the same way for each engine.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import InputError, MeasurementError
from collectors.serving import client, load, traces
from store.spool.bundle import Bundle, new_run_id


@dataclass
class ProfilePlan:
    spec: load.LoadSpec  # the profiled load
    warmup: int  # requests sent before the profiler starts
    trace_dir: Path | None  # None: an nsys report instead (``report``)
    expected: int | None  # rank files to wait for (None: until nothing changes for settle_s)
    flush_timeout_s: float
    settle_s: float
    start: Callable[[], None]  # POST /start_profile (raises InputError/MeasurementError)
    stop: Callable[[], None] | None  # POST /stop_profile; None: the server stops by itself
    empty_grace_s: float | None = None  # after a successful stop: nothing by then = no trace
    empty_why: str = ""
    report: Path | None = None  # the server runs under nsys: its report, not torch traces


@dataclass
class ProfileOutcome:
    results: list[load.RequestResult]
    duration_s: float
    files: list[Path]
    waited_s: float  # from /stop_profile until the trace files were final


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """The profile verbs' load flags (what ``check_load_args`` checks)."""
    g = parser.add_argument_group("load while profiling")
    g.add_argument("--num-requests", type=int, default=8, help="requests (default 8)")
    g.add_argument("--concurrency", type=int, default=4, help="concurrent requests (default 4)")
    g.add_argument("--input-len", type=int, default=128, help="prompt tokens (default 128)")
    g.add_argument("--output-len", type=int, default=32, help="output tokens (default 32)")
    g.add_argument("--warmup", type=int, default=1,
                   help="requests sent before the profiler starts (default 1)")  # fmt: skip
    g.add_argument("--request-timeout", type=float, default=120.0, metavar="S",
                   help="per-request timeout (default 120)")  # fmt: skip


def add_trace_file_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The profile verbs' flags for waiting on the trace files; the group, for an engine's own."""
    w = parser.add_argument_group("trace files")
    w.add_argument("--flush-timeout", type=float, default=900.0, metavar="S",
                   help="give up waiting for final trace files after S seconds (default 900)")  # fmt: skip
    w.add_argument("--settle", type=float, default=10.0, metavar="S",
                   help="with an unknown world size: done when nothing changed for S seconds "
                   "(default 10)")  # fmt: skip
    return w


def add_nsys_argument(parser: argparse.ArgumentParser) -> None:
    """``--nsys-report``: the server runs under Nsight Systems with the CUDA profiler."""
    parser.add_argument(
        "--nsys-report", type=Path, metavar="PATH",
        help="the server runs under `nsys profile --capture-range=cudaProfilerApi "
        "--capture-range-end=repeat -o NAME` with the CUDA profiler: ingest the report nsys "
        "writes after /stop_profile (NAME.nsys-rep, NAME.sqlite, or their folder) instead of "
        "torch traces (docs/nsys.md)",
    )  # fmt: skip


def check_url_and_load(args: argparse.Namespace) -> str:
    """``--url`` and the load's sizes (``add_load_arguments``); the server's base URL."""
    try:
        base = client.normalize_base(args.url)
    except ValueError as exc:
        raise InputError(f"--url: {exc}") from None
    for name in ("num_requests", "concurrency", "input_len", "output_len"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')}: must be at least 1")
    return base


def check_load_args(args: argparse.Namespace) -> str:
    """The profile verbs' common checks (``--url``, the load's sizes, ``--trace-dir`` or
    ``--nsys-report``); the server's base URL."""
    base = check_url_and_load(args)
    report = getattr(args, "nsys_report", None)
    if report is not None:
        folder = report if report.is_dir() else report.parent
        if not folder.is_dir():
            raise InputError(f"--nsys-report {report}: no such folder on this machine")
    elif args.trace_dir is None:
        raise InputError("--trace-dir: required (the profiler's trace folder), or "
                         "--nsys-report for a server run under nsys")  # fmt: skip
    elif not args.trace_dir.is_dir():
        raise InputError(f"--trace-dir {args.trace_dir}: no such folder on this machine")
    return base


def run_profile(plan: ProfilePlan, log: logging.Logger) -> ProfileOutcome:
    """Warm up, profile the load, stop, and wait until every rank's trace file is whole."""
    base = plan.spec.base_url
    if plan.warmup > 0:
        warm = dataclasses.replace(plan.spec, num_requests=plan.warmup, concurrency=1,
                                   output_len=min(plan.spec.output_len, 4))  # fmt: skip
        check_load(load.run_load(warm), base, "warm-up")
    before = traces.snapshot(plan.trace_dir) if plan.report is None else set()
    started_at = time.time()  # a report nsys writes for this run is newer
    plan.start()
    log.info(f"profiler started; {plan.spec.num_requests} requests at concurrency "
             f"{plan.spec.concurrency}")  # fmt: skip
    t0 = time.perf_counter()
    stopped = False
    try:
        results = load.run_load(plan.spec, progress(log))
    finally:
        stop_at = time.monotonic()
        if plan.stop is not None:
            try:
                plan.stop()
                stopped = True
            except MeasurementError as exc:
                log.warning(f"stop_profile failed: {exc}")
    duration = time.perf_counter() - t0
    check_load(results, base, "load")
    if plan.report is not None:
        report, waited_s = traces.wait_for_report(plan.report, started_at, plan.flush_timeout_s,
                                                  plan.settle_s, log, stop_at)  # fmt: skip
        log.info(f"nsys report {report} final after {waited_s:.1f} s; ingesting")
        return ProfileOutcome(results, duration, [report], waited_s)
    files, waited_s = traces.wait_for_traces(
        plan.trace_dir, before, plan.expected, timeout_s=plan.flush_timeout_s,
        settle_s=plan.settle_s, log=log, start=stop_at,
        empty_grace_s=plan.empty_grace_s if stopped else None, empty_why=plan.empty_why,
    )  # fmt: skip
    log.info(f"{len(files)} trace file(s) final after {waited_s:.1f} s; ingesting")
    return ProfileOutcome(results, duration, files, waited_s)


def commit_profile(ctx: Context, verb: str, engine: str, version: str | None,
                   server_table: str, server_row: dict, out: ProfileOutcome,
                   summary: dict, model_dir: str | None = None) -> int:  # fmt: skip
    """Ingest the rank traces and commit them with the server row and the load, as one run.

    ``summary["url"]`` is the server's: the run is filed under its machine (collectors/core/
    hosts.py). The served model's config is recorded with the run when it is found
    (``model_dir``: the folder the user named; else the HF cache by the model's name), so the
    pages can predict for it. The folder the server reports (its ``root``) is recorded as a
    name, never read.
    """
    from collectors.serving.model_config import model_config_tables
    from collectors.trace.ingest import ingest_traces

    try:
        ingest = ingest_traces(out.files, log=ctx.log)
    except InputError as exc:
        raise MeasurementError(f"the server's trace files are unusable: {exc}") from None
    host, env = ctx.server_run(summary["url"])  # the server's machine: its GPUs were traced
    if version:
        env[engine] = version  # the server's version is what the traces describe
    tables = dict(ingest.tables)
    tables[server_table] = [server_row]
    tables["vllm_load"] = [r.row() for r in out.results]  # per-request timings, any engine
    tables.update(model_config_tables(server_row.get("model_id"), model_dir))
    record = ctx.run_record(new_run_id(verb), env=env, host=host,
                            status="partial" if ingest.partial else "ok", message=ingest.message)  # fmt: skip
    stats = load.summarize(out.results, out.duration_s)
    ctx.log.info(f"load: {stats['completed']} ok, median TTFT {fmt_ms(stats['median_ttft_ms'])} "
                 f"ms, median TPOT {fmt_ms(stats['median_tpot_ms'])} ms (profiler on)")  # fmt: skip
    full = {**summary, "trace_files": [str(f) for f in out.files], "load": stats,
            "trace": ingest.summary}  # fmt: skip
    return ctx.submit(Bundle(record, tables), full)


def progress(log: logging.Logger) -> Callable[[int, int], None]:
    """Log the load's progress at each quarter."""
    step = {"next": 0.0}

    def report(done: int, total: int) -> None:
        if done / total >= step["next"]:
            log.info(f"load: {done}/{total} requests done")
            step["next"] += 0.25

    return report


def check_load(results: list[load.RequestResult], base: str, what: str) -> None:
    failed = [r for r in results if not r.ok]
    if failed:
        raise MeasurementError(
            f"{base}: {len(failed)} of {len(results)} {what} request(s) failed - did the server "
            f"stop? first error: {failed[0].error}"
        )


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"
