"""``host``: snapshot this machine's environment (and its GPUs when NVML is available)."""

from __future__ import annotations

import argparse

from collectors.context import Context
from store.bundle import Bundle, new_run_id


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults()


def run(args: argparse.Namespace, ctx: Context) -> int:
    env = ctx.environment()
    gpus = env.get("gpus") or []
    message = env.get("nvml") if not gpus else None
    record = ctx.run_record(new_run_id("host"), env=env, message=message)
    tables = {}
    if gpus:
        tables["host_gpus"] = {
            "gpu_index": [g["index"] for g in gpus],
            "name": [g["name"] for g in gpus],
            "uuid": [g["uuid"] for g in gpus],
            "memory_bytes": [g["memory_bytes"] for g in gpus],
            "pci_bus_id": [g["pci_bus_id"] for g in gpus],
        }
    summary = {
        "host": record.host,
        "os": env["os"],
        "cpu": env["cpu"],
        "gpu_count": env["gpu_count"],
        "gpu_model": env["gpu_model"],
    }
    if message:
        ctx.log.info(f"no GPUs recorded: {message}")
    return ctx.submit(Bundle(record, tables), summary)
