"""Small real bundles for store tests."""

from __future__ import annotations

from store.spool.bundle import Bundle, RunRecord, new_run_id, utc_now_iso


def host_bundle(host: str = "test-host", gpus: int = 0, label: str | None = None) -> Bundle:
    now = utc_now_iso()
    run = RunRecord(
        run_id=new_run_id("host"),
        verb="host",
        host=host,
        started_at=now,
        finished_at=now,
        label=label,
        env={"hostname": host, "gpu_count": gpus, "gpu_model": "GPU-X" if gpus else None},
        args={"label": label},
    )
    tables = {}
    if gpus:
        tables["host_gpus"] = {
            "gpu_index": list(range(gpus)),
            "name": ["GPU-X"] * gpus,
            "uuid": [f"GPU-{i}" for i in range(gpus)],
            "memory_bytes": [96 * 2**30] * gpus,
            "pci_bus_id": [f"0000:{i:02x}:00.0" for i in range(gpus)],
        }
    return Bundle(run, tables)
