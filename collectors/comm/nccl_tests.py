"""``nccl-tests FILE...``: import nccl-tests output (text logs of every era, or ``-J`` JSON).

One run per file, with a content-derived run id: importing the same file again is a no-op.
Every file is parsed before anything is committed, so one bad file commits nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from collectors.comm import nccl_tests_parse as fmt
from collectors.core import inputs
from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError
from collectors.core.hosts import imported_env
from store import bounds
from store.spool.bundle import Bundle, content_run_id

INTERCONNECTS = ("pcie-only", "nvlink", "mixed", "none", "unknown")
MAX_BYTES = 64 * inputs.MiB  # a whole sweep's log with NCCL INFO lines is a few MB


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="nccl-tests stdout log or -J JSON")
    p.add_argument("--op", choices=sorted(set(fmt.PROGRAMS.values())),
                   help="collective, when the file cannot say (no test name in it)")  # fmt: skip
    p.add_argument("--world-size", type=int, help="ranks, when the log lost its preamble")
    p.add_argument("--interconnect", choices=INTERCONNECTS,
                   help="the measured host's GPU interconnect (default: unknown, or nvlink "
                        "when NCCL INFO lines show NVLS)")  # fmt: skip


def _load(path: Path, args: argparse.Namespace) -> tuple[bytes, fmt.Parsed]:
    data = inputs.read_bytes(path, MAX_BYTES, "an nccl-tests log")
    text = data.decode("utf-8", errors="replace")
    try:
        parsed = fmt.parse(text, path.name)
    except fmt.NotNcclTests as exc:
        raise InputError(f"{path}: {exc}") from None
    _check(path, parsed)
    if args.op:
        for row in parsed.rows:
            row.op = args.op
    if any(row.op is None for row in parsed.rows):
        raise InputError(f"{path}: cannot tell which collective this is (no '# Collective test "
                         "starting' line, no *_perf name in the log or file name); pass --op")  # fmt: skip
    if args.world_size:
        parsed.world_size = args.world_size
    elif parsed.world_size is None:
        parsed.world_size = fmt.infer_world_size(parsed)
    return data, parsed


def _check(path: Path, parsed: fmt.Parsed) -> None:
    """Every figure a machine could have measured (store/bounds.py), else one line naming the
    row and the field."""
    for i, row in enumerate(parsed.rows, 1):
        where = f"{path} row {i} ({row.size} B)"
        for field, value, bound in (("size", row.size, bounds.BYTES),
                                    ("count", row.count, bounds.BYTES)):  # fmt: skip
            if why := bounds.check(value, bound, field, where):
                raise InputError(why)
        for name, half in (("out-of-place", row.out_of_place), ("in-place", row.in_place)):
            if half is None:
                continue
            for field, value, bound in (("time", half.time_us, bounds.COMM_US),
                                        ("algbw", half.algbw_gbps, bounds.BANDWIDTH_GBPS),
                                        ("busbw", half.busbw_gbps, bounds.BANDWIDTH_GBPS),
                                        ("#wrong", half.wrong, bounds.BYTES)):  # fmt: skip
                if value is not None and (why := bounds.check(value, bound, f"{name} {field}",
                                                              where)):  # fmt: skip
                    raise InputError(why)
    for footer in parsed.footers:
        if why := bounds.check(footer, bounds.BANDWIDTH_GBPS, "Avg bus bandwidth", str(path)):
            raise InputError(why)
    for field, value, bound in (("ranks", parsed.world_size, bounds.PARALLEL),
                                ("iters", parsed.iters, bounds.REQUESTS)):  # fmt: skip
        if value is not None and (why := bounds.check(value, bound, field, str(path))):
            raise InputError(why)


def run(args: argparse.Namespace, ctx: Context) -> int:
    files = inputs.unique(Path(f) for f in args.files)
    loaded = [(f, *_load(f, args)) for f in files]
    code = EXIT_OK
    for path, data, parsed in loaded:
        if parsed.noise_rows:
            ctx.log.warning(f"{path}: skipped {parsed.noise_rows} line(s) shaped like rows that "
                            "did not parse (interleaved output?)")  # fmt: skip
        bundle, summary = _bundle(ctx, path, data, parsed, args)
        code = max(code, ctx.submit(bundle, summary))
    return code


def _interconnect(args: argparse.Namespace, data: bytes) -> str:
    if args.interconnect:
        return args.interconnect
    # NVLS (NVLink SHARP) is only set up over NVSwitch: the one sure sign in NCCL INFO lines.
    return "nvlink" if b"NVLS multicast support is available" in data else "unknown"


def _bundle(ctx: Context, path: Path, data: bytes, parsed: fmt.Parsed,
            args: argparse.Namespace) -> tuple[Bundle, dict[str, Any]]:  # fmt: skip
    run_id = content_run_id("nccl-tests", data)
    # nccl-tests reports one time per half (the mean over its iterations): no percentiles.
    rows = [{"op": r.op, "dtype": r.dtype, "tokens_per_rank": None, "hidden": None,
             "bytes": r.size, "count": r.count, "in_place": ip, "iters": parsed.iters,
             "p50_us": h.time_us, "p10_us": None, "p90_us": None, "min_us": None,
             "mean_us": h.time_us, "algbw_gbps": h.algbw_gbps, "busbw_gbps": h.busbw_gbps,
             "wrong": h.wrong} for r, ip, h in parsed.halves()]  # fmt: skip
    results = {c: [row[c] for row in rows] for c in (rows[0] if rows else ())}
    footer = parsed.footers[-1] if len(parsed.footers) == 1 else None
    names = " + ".join(parsed.gpu_names) or None
    meta = {
        "source": ["nccl-tests"], "backend": ["nccl"], "world_size": [parsed.world_size],
        "device": ["cuda"], "graph_mode": [parsed.graph], "nccl_version": [parsed.nccl_version],
        "nccl_env": [json.dumps(parsed.nccl_env)], "interconnect": [_interconnect(args, data)],
        "gpu_names": [names], "file": [str(path.resolve())],
        "nccl_tests_version": [parsed.nccl_tests_version],
        "avg_busbw_gbps": [parsed.avg_busbw_gbps], "footer_avg_busbw_gbps": [footer],
    }  # fmt: skip
    # The runs row describes the measured host (from the file), not the importing machine:
    # that one is `imported_on`, and a file that names no host is filed under UNKNOWN_HOST.
    env = imported_env(gpu_model=names, gpu_count=parsed.world_size, nccl=parsed.nccl_version)
    fields: dict[str, Any] = {"host": ctx.import_host(parsed.hostname)}
    for key, value in (("started_at", parsed.started_at), ("finished_at", parsed.finished_at)):
        if value and (when := _local_time(value)):
            fields[key] = when
    missing = [what for what, gone in (("footer", not parsed.footers),
                                       ("preamble", not parsed.gpu_names)) if gone]  # fmt: skip
    message = f"imported {path.name}" + (f"; no {' or '.join(missing)} in it" if missing else "")
    record = ctx.run_record(run_id, env=env, message=message, **fields)
    summary = {
        "file": str(path), "op": ",".join(parsed.ops), "world_size": parsed.world_size,
        "dtype": ",".join(parsed.dtypes), "rows": len(parsed.rows),
        "avg_busbw_gbps": parsed.avg_busbw_gbps, "footer_avg_busbw_gbps": footer,
    }  # fmt: skip
    return Bundle(record, {"comm_meta": meta, "comm_results": results}), summary


def _local_time(text: str) -> str | None:
    """nccl-tests writes local wall time without a zone; keep it as the importer's local time."""
    from datetime import datetime

    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").astimezone().isoformat()
    except (TypeError, ValueError):
        return None
