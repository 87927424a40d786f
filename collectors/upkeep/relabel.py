"""``relabel RUN_ID --host NAME``: file a stored run under the host that recorded it.

An import whose files name no host (a trace, an nccl-tests log, benchmark results, an expert
dump) is filed under ``unknown`` (store.UNKNOWN_HOST; collectors/core/hosts.py); this names it. Works on an embedded store and a DuckLake; running it
again with the same name is a no-op (exit 0, "already").
"""

from __future__ import annotations

import argparse

from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", help="the stored run to file under --host")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from store.reader import store_exists
    from store.relabel import relabel

    host = (args.host_name or "").strip()
    if not host:
        raise InputError("give the host that recorded the run: --host NAME")
    if any(ord(ch) < 32 for ch in host) or len(host) > 253:
        raise InputError(f"--host {host!r} is not a host name (the one that recorded "
                         "the run, e.g. gpu-node-7)")  # fmt: skip
    if not store_exists(ctx.loc):
        raise InputError(f"there is no store at {ctx.loc.describe()}")
    if args.dry_run:
        ctx.log.info(f"dry run: run {args.run_id} not relabelled")
        ctx.emit({"run_id": args.run_id, "host": host, "dry_run": True})
        return EXIT_OK
    done = relabel(ctx.loc, args.run_id, host, ctx.commit_timeout)
    if done.before is None:
        raise InputError(f"run {args.run_id!r} is not in {ctx.loc.describe()}")
    if done.changed:
        ctx.log.info(f"run {done.run_id}: host {done.before} -> {done.after}")
    else:
        ctx.log.info(f"run {done.run_id} is already on host {done.after}; nothing changed")
    ctx.emit({"run_id": done.run_id, "host": done.after, "before": done.before,
              "changed": done.changed})  # fmt: skip
    return EXIT_OK
