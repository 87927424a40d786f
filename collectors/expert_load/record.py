"""Record expert load from a running SGLang server: start, load, stop, dump, wait for files.

Routes (python/sglang/srt/entrypoints/http_server.py, sgl-project/sglang): ``POST
/start_expert_distribution_record`` (200 "Start recording the expert distribution."; the
recorder resets), ``POST /stop_expert_distribution_record``, ``POST
/dump_expert_distribution_record`` (the schedulers write their files, then the recorder
resets). They answer only when the server was launched with
``--expert-distribution-recorder-mode`` (``stat``, ``stat_approx``, ``per_pass`` or
``per_token``; server_args.py), which ``/get_server_info`` reports as
``expert_distribution_recorder_mode``. Files land in ``SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR``
(default ``/tmp``, python/sglang/srt/environ.py) on the server's machine, named
``expert_distribution_recorder_{time}.pt`` (stat: rank 0 only) or ``..._{time}_{rank}.pt``
(per_pass / per_token: every rank) by ``_dump_to_file`` in eplb/expert_distribution.py;
``--dump-dir`` is that folder as seen from here. The load is the profile verbs' streaming
load (collectors/serving/load.py), warm-up first, like ``sglang-profile``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from collectors.core.errors import InputError, MeasurementError
from collectors.expert_load import sglang_files
from collectors.serving import client, load, orchestrate
from collectors.serving.sglang import server

PATTERN = "expert_distribution_recorder_*.pt"
MODES = ("stat", "stat_approx", "per_pass", "per_token")


@dataclass
class Recorded:
    recording: sglang_files.Recording
    facts: server.ServerFacts
    base: str
    load_stats: dict
    mode: str | None  # the server's --expert-distribution-recorder-mode, when it says


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("recording from a running SGLang server (--url)")
    g.add_argument("--url", help="the SGLang server, e.g. http://127.0.0.1:30000")
    g.add_argument("--dump-dir", type=Path, default=Path("/tmp"),
                   help="the server's SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR as seen from this "
                   "machine (default /tmp, SGLang's default)")  # fmt: skip
    g.add_argument("--dump-timeout", type=float, default=120.0, metavar="S",
                   help="give up waiting for the dump files after S seconds (default 120)")
    g.add_argument("--settle", type=float, default=3.0, metavar="S",
                   help="the dump is done when no file changed for S seconds (default 3)")
    g.add_argument("--wait", action="store_true",
                   help="wait for another measurement to finish instead of skipping")  # fmt: skip
    g.add_argument("--wait-timeout", type=float, default=None, metavar="S",
                   help="give up waiting after S seconds (exit 0, skipped)")  # fmt: skip
    orchestrate.add_load_arguments(parser)


def check_args(args: argparse.Namespace) -> str:
    base = orchestrate.check_url_and_load(args)
    if not args.dump_dir.is_dir():
        raise InputError(f"--dump-dir {args.dump_dir}: no such folder on this machine")
    return base


def _post(base: str, path: str, timeout: float = 60.0) -> None:
    try:
        client.request(f"{base}{path}", method="POST", timeout=timeout)
    except client.HttpStatus as exc:
        raise MeasurementError(f"SGLang {path} failed: {exc} (was the server launched with "
                               "--expert-distribution-recorder-mode stat?)") from None  # fmt: skip
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"SGLang server down? {exc}") from None


def record(args: argparse.Namespace, base: str, facts: server.ServerFacts,
           log: logging.Logger) -> Recorded:  # fmt: skip
    """Drive the server at ``base`` (``check_args``) and return what its dump files hold."""
    mode = facts.info.get("expert_distribution_recorder_mode")
    if "expert_distribution_recorder_mode" in facts.info and mode not in MODES:
        raise MeasurementError(f"{base} was launched without --expert-distribution-recorder-mode "
                               "(it records nothing); relaunch it with "
                               "--expert-distribution-recorder-mode stat")  # fmt: skip
    spec = load.LoadSpec(base, facts.model or args.model, args.num_requests, args.concurrency,
                         args.input_len, args.output_len, args.request_timeout)  # fmt: skip
    if args.warmup > 0:
        warm = dataclasses.replace(spec, num_requests=args.warmup, concurrency=1,
                                   output_len=min(spec.output_len, 4))  # fmt: skip
        orchestrate.check_load(load.run_load(warm), base, "warm-up")
    before = {p.name for p in args.dump_dir.glob(PATTERN)}
    _post(base, "/start_expert_distribution_record")
    log.info(f"{base}: recording expert distribution ({mode or 'mode not reported'}); "
             f"{spec.num_requests} requests at concurrency {spec.concurrency}")  # fmt: skip
    t0 = time.perf_counter()
    try:
        results = load.run_load(spec, orchestrate.progress(log))
    finally:
        _post(base, "/stop_expert_distribution_record")
    duration = time.perf_counter() - t0
    orchestrate.check_load(results, base, "load")
    _post(base, "/dump_expert_distribution_record", timeout=args.dump_timeout)
    files = wait_for_dump(args.dump_dir, before, args.dump_timeout, args.settle, log)
    return Recorded(sglang_files.read(files), facts, base, load.summarize(results, duration), mode)


def wait_for_dump(folder: Path, before: set[str], timeout_s: float, settle_s: float,
                  log: logging.Logger, poll_s: float = 0.25) -> list[Path]:  # fmt: skip
    """The new dump files once at least one exists and none changed for ``settle_s``.

    ``torch.save`` writes a file in one go, but per_pass / per_token ranks write one each,
    not all at once: so wait until the set of files and their sizes stop changing."""
    deadline = time.monotonic() + timeout_s
    seen: dict[str, int] = {}
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        now = {p.name: p.stat().st_size for p in folder.glob(PATTERN) if p.name not in before}
        if now != seen:
            seen, stable_since = now, time.monotonic()
        elif seen and time.monotonic() - stable_since >= settle_s:
            log.info(f"{len(seen)} dump file(s) in {folder}")
            return [folder / name for name in sorted(seen)]
        time.sleep(poll_s)
    raise MeasurementError(
        f"no complete {PATTERN} appeared in {folder} within {timeout_s:g} s of "
        "/dump_expert_distribution_record: is --dump-dir the server's "
        "SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR (default /tmp) as seen from this machine?")
