"""``python -m collectors``: the verb table, common flags, exit codes and error lines."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from dataclasses import dataclass

from collectors.core.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORE_BUSY,
    EXIT_USAGE,
    InputError,
    MeasurementError,
)
from collectors.core.log import setup as setup_logging
from store import settings
from store.errors import StoreBusy, StoreError
from store.location import check_usable, redact, resolve


@dataclass(frozen=True)
class Verb:
    name: str
    module: str  # defines run(args, ctx) -> int, and add_arguments(parser) if it has options
    help: str
    measures: bool = False  # takes the host-wide measurement lock
    writes: bool = True  # commits to the store (so a store path that can never work fails first)


VERBS: tuple[Verb, ...] = (
    # Measure this host
    Verb("host", "collectors.inventory.host", "snapshot this machine: OS, CPU, memory, GPUs, versions"),
    Verb("gpu", "collectors.inventory.gpu", "NVML inventory: GPUs, PCIe/NVLink, P2P and topology "
         "matrices, interconnect class"),  # fmt: skip
    Verb("profile", "collectors.profile.command", "profile a built-in MoE decode step (TP over local "
         "ranks) with torch.profiler and import it", measures=True),  # fmt: skip
    Verb("comm", "collectors.comm.command", "benchmark collectives (all_reduce, all_to_all, ...) in "
         "tokens per GPU or bytes", measures=True),  # fmt: skip
    Verb("vllm-profile", "collectors.serving.vllm.profile", "profile a running vLLM server under a "
         "short streaming load and import its per-rank traces", measures=True),  # fmt: skip
    Verb("vllm-bench", "collectors.serving.vllm.bench", "import `vllm bench serve` results (JSON or "
         "printed logs), or run a concurrency sweep (lock only while running)"),  # fmt: skip
    Verb("vllm-metrics", "collectors.serving.vllm.metrics", "one scrape of a vLLM server's Prometheus "
         "/metrics (cheap; for cron)"),  # fmt: skip
    Verb("sglang-profile", "collectors.serving.sglang.profile", "profile a running SGLang server under "
         "a short streaming load and import every TP rank's trace", measures=True),  # fmt: skip
    Verb("sglang-bench", "collectors.serving.sglang.bench", "import sglang.bench_serving results "
         "(JSONL or printed logs), or run a concurrency sweep"),  # fmt: skip
    Verb("sglang-metrics", "collectors.serving.sglang.metrics", "one scrape of an SGLang server's "
         "sglang:* Prometheus /metrics (cheap; for cron)"),  # fmt: skip
    Verb("expert-load", "collectors.expert_load.command", "import SGLang expert distribution "
         "recordings (.pt of any recorder mode, or JSON logical_count), or record one from a "
         "running server (--url): routing skew per layer and EP rank"),  # fmt: skip
    # Import what was measured elsewhere
    Verb("trace", "collectors.trace.command", "import PyTorch-profiler (Kineto) traces or Nsight "
         "Systems exports: per-rank, per-step kernel breakdown"),  # fmt: skip
    Verb("floor", "collectors.trace.floor", "a stored trace run's decode steps against their "
         "physical floors, per category: how much each part could still win",
         writes=False),  # fmt: skip
    Verb("nccl-tests", "collectors.comm.nccl_tests", "import nccl-tests output (text logs of every "
         "era, or -J JSON)"),  # fmt: skip
    Verb("import", "collectors.upkeep.import_run", "commit a run exported by `export` into this "
         "store (validated; re-import is a no-op)"),  # fmt: skip
    # Store upkeep
    Verb("export", "collectors.upkeep.export_run", "write one run (every table) as Parquet files "
         "in a folder or a .zip, to hand to a teammate", writes=False),  # fmt: skip
    Verb("flush", "collectors.upkeep.flush", "commit run bundles waiting in the spool"),
    Verb("relabel", "collectors.upkeep.relabel", "file a stored run under the host that "
         "recorded it (--host NAME); re-running is a no-op"),  # fmt: skip
    Verb("doctor", "collectors.upkeep.doctor", "check store, spool backlog, lock dir, NVML and "
         "optionally a vLLM or SGLang URL; one pass/warn/fail line each",
         writes=False),  # fmt: skip
    Verb("check", "collectors.upkeep.check", "compare the newest run of every measured series with "
         "its history; one line per regression or improvement, exit 3 on a regression; "
         "the findings are kept as a run the dashboard shows"),  # fmt: skip
    Verb("migrate", "collectors.upkeep.migrate_store", "copy every run of an embedded store into a "
         "DuckLake (--to URL); re-running is a no-op"),  # fmt: skip
    Verb("compact", "collectors.upkeep.compact", "merge a lake's small files and expire old "
         "snapshots (daily; rows unchanged)"),  # fmt: skip
)


def _common_flags() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("common options")
    g.add_argument("--store", help="store path or ducklake: URL (default: $STEPSCOPE_STORE, "
                   "else ~/.local/share/stepscope/stepscope.duckdb)")  # fmt: skip
    g.add_argument("--label", help="free-text label saved with the run")
    g.add_argument("--host", dest="host_name",
                   help="host the run is about (default: this machine; with --url the "
                   "server's; for imported files the host they name, else 'unknown')")  # fmt: skip
    g.add_argument("--json", action="store_true", help="print a machine summary on stdout")
    g.add_argument("--dry-run", action="store_true", help="do everything but the commit")
    g.add_argument("--log-format", choices=("text", "json"),
                   help="log lines on stderr (default: text on a TTY, else json)")  # fmt: skip
    g.add_argument("--commit-timeout", type=float, default=None, metavar="S",
                   help="seconds to retry while the store is busy (default 30)")  # fmt: skip
    g.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return common


def _measure_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("measurement lock")
    g.add_argument("--wait", action="store_true",
                   help="wait for another measurement to finish instead of skipping")  # fmt: skip
    g.add_argument("--wait-timeout", type=float, default=None, metavar="S",
                   help="give up waiting after S seconds (exit 0, skipped)")  # fmt: skip
    return p


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; ``only``: import just that verb's module for its arguments (the
    others keep their name and help, which is all ``--help`` lists), so running one verb
    does not import every collector (start-up time, issue 12)."""
    parser = argparse.ArgumentParser(
        prog="python -m collectors",
        description="Stepscope collectors: measure or import, then commit a run to the store.",
        epilog="exit codes: 0 ok (or skipped: measurement lock held), 1 failed, 2 usage, "
        "75 store busy (run kept in the spool; `python -m collectors flush` commits it)",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB", title="verbs")
    common, measure = _common_flags(), _measure_flags()
    for verb in VERBS:
        parents = [common, measure] if verb.measures else [common]
        p = sub.add_parser(verb.name, help=verb.help, description=verb.help, parents=parents)
        p.set_defaults(_verb=verb)
        if only is None or verb.name == only:
            module = importlib.import_module(verb.module)
            if hasattr(module, "add_arguments"):  # none in a verb without options of its own
                module.add_arguments(p)
    return parser


def single_threaded_blas() -> None:
    """One OpenBLAS thread for numpy in this process and its children, unless the user set
    ``OPENBLAS_NUM_THREADS``.

    numpy's bundled OpenBLAS starts a thread per core when numpy is imported, and they spin
    a while: numpy issue #29193 (github.com/numpy/numpy/issues/29193) measured 1.28 CPU s
    for ``import numpy`` on a many-core host against 0.05 s with one thread, CPU taken
    from the GPU host's serving processes by every cron'd collector (here, on 2 cores: 0.22
    against 0.12 CPU s, docs/benchmarks.md). Import verbs never
    call BLAS (sorting, searching and grouping only), so they lose nothing. Measuring verbs
    are left as they are: torch may use OpenBLAS for CPU work (on aarch64 hosts).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def return_freed_memory() -> None:
    """glibc: every block of 128 KiB or more from its own mapping, returned to the system when
    freed. By default glibc raises that threshold to the largest block freed so far (up to
    32 MiB), after which an import's growing columns and inflated chunks come from the heap
    and their freed space stays in the process: reading a 10-million-event trace held 0.6
    GB more at its peak than it used (docs/benchmarks.md). Elsewhere (musl, macOS): no-op."""
    import ctypes
    from contextlib import suppress

    with suppress(AttributeError, OSError):  # no mallopt: not glibc
        ctypes.CDLL(None).mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD (malloc.h)


def _verb_named(argv: list[str]) -> str | None:
    """The verb of a command line (the top-level parser takes no option values, so it is
    the first word that is not an option), or None."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in {v.name for v in VERBS} else None


def check_host_flag(name: str | None) -> None:
    """``--host``: any name but the one kept for runs whose files name no machine."""
    from store import UNKNOWN_HOST

    if name is not None and name.strip() == UNKNOWN_HOST:
        raise InputError(f"--host {name!r} is not a host name: it is kept for runs whose files "
                         "name no machine; name the one that recorded the run, e.g. gpu-node-7")


def main(argv: list[str] | None = None, lock: bool = True, standalone: bool = False) -> int:
    """Run one verb; ``lock=False`` runs a measuring verb without the measurement lock (a
    torchrun rank whose local rank 0 holds it for this host: collectors/comm/__main__.py);
    ``standalone``: this process is the verb's own (its stderr is the log's, collectors/core/
    log.py)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(only=_verb_named(argv))
    args = parser.parse_args(argv)
    verb: Verb | None = getattr(args, "_verb", None)
    if verb is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    log = setup_logging(args.log_format, verb.name, args.verbose, standalone)
    if not verb.measures:
        single_threaded_blas()
        return_freed_memory()
    from collectors.core.context import Context  # after logging is set up

    try:
        check_host_flag(args.host_name)
        ctx = Context(verb.name, args, log, resolve(args.store))
        if verb.writes and not args.dry_run:
            check_usable(ctx.loc)
        module = importlib.import_module(verb.module)
        if not verb.measures or not lock:
            return module.run(args, ctx)
        from collectors.core.lock import LockHeld, measurement_lock

        try:
            with measurement_lock(verb.name, args.wait, args.wait_timeout):
                return module.run(args, ctx)
        except LockHeld as exc:
            log.warning(f"skipped: {exc}; use --wait to queue behind it")
            return EXIT_OK
    except (InputError, MeasurementError, StoreError) as exc:
        log.error(str(exc))
        return EXIT_STORE_BUSY if isinstance(exc, StoreBusy) else EXIT_FAILED
    except KeyboardInterrupt:
        log.error("interrupted; nothing was committed for this run")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get(settings.DEBUG.name):
            raise
        logging.getLogger("stepscope").error(  # a library's words may quote a store URL
            f"internal error: {type(exc).__name__}: {redact(str(exc))} "
            "(set STEPSCOPE_DEBUG=1 for the traceback)"
        )
        return EXIT_FAILED
