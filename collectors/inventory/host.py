"""``host``: snapshot this machine's environment (and its GPUs when NVML is available)."""

from __future__ import annotations

import argparse

from collectors.core.context import Context
from store.spool.bundle import Bundle, new_run_id


def run(args: argparse.Namespace, ctx: Context) -> int:
    env = ctx.environment()
    gpus = env.get("gpus") or []
    message = env.get("nvml") if not gpus else None
    record = ctx.run_record(new_run_id("host"), env=env, message=message)
    columns = {"gpu_index": "index", "name": "name", "uuid": "uuid",
               "memory_bytes": "memory_bytes", "pci_bus_id": "pci_bus_id"}  # fmt: skip
    rows = {col: [g[key] for g in gpus] for col, key in columns.items()}
    tables = {"host_gpus": rows} if gpus else {}
    summary = {"host": record.host, **{k: env[k] for k in ("os", "cpu", "gpu_count", "gpu_model")}}
    if message:
        ctx.log.info(f"no GPUs recorded: {message}")
    return ctx.submit(Bundle(record, tables), summary)
