"""``doctor``: is this host ready for cron? One PASS/WARN/FAIL line per check; exit 1 on a FAIL.

Checks: the store (reachable, schema version), a lake's data path (its folder or bucket:
reachable, writable, the catalog's data files present), the spool backlog (pending count and age,
corrupt and half-written entries), the measurement lock directory, NVML, and a vLLM or SGLang
server when ``--vllm-url`` / ``--sglang-url`` is given (its version and ``/health``). Nothing
is written to the store.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from contextlib import suppress
from dataclasses import asdict, dataclass

from collectors.core.context import Context
from collectors.core.errors import EXIT_FAILED, EXIT_OK, InputError
from collectors.core.log import printable

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


@dataclass
class Check:
    name: str
    status: str
    detail: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vllm-url", metavar="URL",
                        help="also check a vLLM server, e.g. http://127.0.0.1:8000")  # fmt: skip
    parser.add_argument("--sglang-url", metavar="URL",
                        help="also check an SGLang server, e.g. http://127.0.0.1:30000")  # fmt: skip
    parser.add_argument("--spool-max-age", type=float, default=3600, metavar="S",
                        help="FAIL when a spooled run has waited longer (default 3600 s)")  # fmt: skip
    parser.add_argument("--expect-gpus", action="store_true",
                        help="FAIL (not WARN) when NVML finds no NVIDIA GPU")  # fmt: skip


def check_store(ctx: Context) -> Check:
    from store import migrate
    from store.connect import connection
    from store.errors import StoreBusy, StoreError, StoreMissing

    where = ctx.loc.describe()
    try:
        with connection(ctx.loc, read_only=True, timeout_s=5) as con:
            version = migrate.store_version(con)
    except StoreMissing:
        return Check("store", WARN, f"{where}: no store yet; the first collector run creates it")
    except StoreBusy as exc:
        return Check("store", WARN, f"{exc} (a commit in progress; readers retry)")
    except StoreError as exc:
        return Check("store", FAIL, str(exc))
    except Exception as exc:  # a damaged file, a permission problem: say it, do not crash
        from store.location import redact

        return Check("store", FAIL,
                     f"{where}: {type(exc).__name__}: {redact(str(exc).splitlines()[0])}")
    code = migrate.code_version()
    if version > code:
        return Check("store", FAIL, f"{where}: schema v{version} is newer than this Stepscope "
                     f"(v{code}); upgrade Stepscope on this host")  # fmt: skip
    if version < code:
        return Check("store", WARN, f"{where}: schema v{version}, the next commit upgrades it "
                     f"to v{code}")  # fmt: skip
    return Check("store", PASS, f"{where}: reachable, schema v{version}")


def check_data_path(ctx: Context) -> Check:
    """A lake's shared folder or bucket: reachable, writable, every data file present."""
    from store.lake.files import check_data_path as probe

    found = probe(ctx.loc)
    return Check("data-path", found.level.upper(), found.detail)


def check_spool(ctx: Context, max_age_s: float) -> list[Check]:
    from store.spool.status import human_age, spool_status

    status = spool_status(ctx.loc.spool_dir)
    flush = ctx.flush_command()
    checks = []
    if not status.pending:
        checks.append(Check("spool", PASS, f"{status.spool_dir}: nothing pending"))
    else:
        age = status.oldest_age_s or 0.0
        level = FAIL if age > max_age_s else WARN
        checks.append(Check("spool", level, f"{status.pending} run(s) waiting in "
                            f"{status.spool_dir}, oldest {human_age(age)} old; commit them "
                            f"with: {flush}"))  # fmt: skip
    if status.corrupt:
        checks.append(Check("spool-corrupt", WARN, f"{status.corrupt} corrupt entr(y/ies) kept "
                            f"in {status.spool_dir / 'corrupt'} for inspection"))  # fmt: skip
    if status.half_written:
        checks.append(Check("spool-partial", WARN, f"{status.half_written} half-written "
                            "entr(y/ies) from a killed collector; the next flush moves them "
                            "aside"))  # fmt: skip
    return checks


def check_lock_dir() -> Check:
    from collectors.core.lock import lock_dir

    directory = lock_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("lock-dir", FAIL, f"{directory}: not writable ({exc.strerror}); set "
                     "STEPSCOPE_LOCK_DIR to a writable folder")  # fmt: skip
    holder = directory / "measure.lock"
    note = ""
    with suppress(OSError, ValueError):  # no holder yet, or one being written
        info = json.loads(holder.read_text() or "{}")
        if info.get("pid") and os.path.exists(f"/proc/{info['pid']}"):
            note = f"; held now by {info.get('verb')} (pid {info['pid']})"
    return Check("lock-dir", PASS, f"{directory}: writable{note}")


def check_nvml(expect_gpus: bool) -> Check:
    from collectors.inventory import nvml

    try:
        inv = nvml.inventory()
    except nvml.NvmlUnavailable as exc:
        return Check("nvml", FAIL if expect_gpus else WARN, f"{exc}; GPU collectors record no "
                     "GPUs on this host")  # fmt: skip
    except Exception as exc:
        return Check("nvml", FAIL, f"NVML error: {type(exc).__name__}: {exc}")
    if not inv.gpus:
        return Check("nvml", FAIL if expect_gpus else WARN, "NVML works but sees no GPU")
    names = sorted({g.name for g in inv.gpus})
    from collectors.inventory.gpu import mig_note

    if note := mig_note(inv.gpus):
        return Check("nvml", WARN, note)
    return Check("nvml", PASS, f"{len(inv.gpus)} GPU(s) ({', '.join(names)}), driver "
                 f"{inv.driver_version}, CUDA {inv.cuda_driver_version}")  # fmt: skip


# Where each engine says its version; both serve ``GET /health`` (200 when healthy).
# vLLM: vllm/entrypoints/openai/api_server.py (``/version``, ``/health``).
# SGLang: python/sglang/srt/entrypoints/http_server.py (``/get_server_info`` carries
# ``version``; ``/health`` and ``/health_generate`` share one handler that answers 503 when
# the scheduler is stuck).
VERSION_ENDPOINTS = {"vllm": "/version", "sglang": "/get_server_info"}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


def check_server(engine: str, base: str) -> Check:
    """One serving engine's server: reachable, its version, and ``/health``."""
    if not base.startswith(("http://", "https://")):
        raise InputError(f"--{engine}-url {base}: give an http:// or https:// URL")
    from collectors.serving import client

    base = base.rstrip("/")
    try:
        version = client.get_json(f"{base}{VERSION_ENDPOINTS[engine]}", 10.0).get("version", "?")
        health, _ = client.request(f"{base}/health", timeout=5.0)
    except client.HttpStatus as exc:
        return Check(engine, FAIL, f"{base}: HTTP {exc.status} from {exc.url}")
    except (client.ServerUnreachable, AttributeError) as exc:  # AttributeError: not an object
        return Check(engine, FAIL, f"{base}: unreachable ({exc})")
    if health != 200:
        return Check(engine, FAIL, f"{base}: /health answered {health}")
    return Check(engine, PASS, f"{base}: {ENGINE_NAMES[engine]} {version}, /health ok")


def run(args: argparse.Namespace, ctx: Context) -> int:
    store = check_store(ctx)
    checks = [store]
    if ctx.loc.kind == "ducklake" and store.status == PASS:
        checks.append(check_data_path(ctx))
    checks += [*check_spool(ctx, args.spool_max_age), check_lock_dir(),
               check_nvml(args.expect_gpus)]  # fmt: skip
    if args.vllm_url:
        checks.append(check_server("vllm", args.vllm_url))
    if args.sglang_url:
        checks.append(check_server("sglang", args.sglang_url))
    width = max(len(c.name) for c in checks)
    for c in checks:
        # One line each on stdout, whatever the log format: doctor's output is its result.
        print(printable(f"{c.status}  {c.name:<{width}}  {c.detail}"), flush=True)
    failed = [c.name for c in checks if c.status == FAIL]
    ctx.emit({"ok": not failed, "checks": [asdict(c) for c in checks]})
    return EXIT_FAILED if failed else EXIT_OK
