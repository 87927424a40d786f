"""Generated nightly histories written as real runs into a real store.

Serving results go through vLLM's result parser (collectors.serving.results), traces are
Kineto files built with tests/trace/synth.py and read by the real importer
(collectors.trace.ingest), collectives are nccl-tests ``-J`` files imported with the CLI.
Each run is dated on its night and carries that night's versions, and a ``host`` snapshot
precedes it, so version changes reach the series points the way cron would put them there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from collectors.serving import results
from collectors.trace.ingest import ingest_traces
from store.commit import flush
from store.location import resolve
from store.spool.bundle import Bundle, RunRecord, write_spool
from tests.trace.synth import AR, GEMM, TraceBuilder

START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)  # night 1, 02:00 UTC
MODEL = "deepseek-ai/DeepSeek-V3"
FLASH = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>"
MOE = "fused_moe_kernel"
OLD = {"vllm": "0.11.0", "torch": "2.8.0+cu128", "nccl": "2.27.3", "driver_version": "570.172.08"}
NEW = {"vllm": "0.11.1", "torch": "2.8.0+cu128", "nccl": "2.28.3", "driver_version": "570.172.08"}
NCCL_CODE = {"2.27.3": 22703, "2.28.3": 22803}


@dataclass(frozen=True)
class Plan:
    """30 nightly runs of 2%-noisy figures; optional step, outlier and upgrade nights."""

    nights: int = 30
    cv: float = 0.02
    step_night: int | None = None  # first night at the new level
    step: float = 0.0  # relative move, +0.12 = 12% slower
    outlier_night: int | None = None
    outlier: float = 0.0
    upgrade_night: int | None = None  # versions move from OLD to NEW on this night
    seed: int = 1

    def factors(self, salt: int = 0, moves: bool = True) -> np.ndarray:
        """One multiplicative factor per night (index 0 = night 1); ``moves``: with the
        plan's step and outlier, else noise alone."""
        rng = np.random.default_rng(self.seed * 1000 + salt)
        f = 1.0 + self.cv * rng.standard_normal(self.nights)
        if not moves:
            return f
        if self.step_night:
            f[self.step_night - 1 :] *= 1.0 + self.step
        if self.outlier_night:
            f[self.outlier_night - 1] *= 1.0 + self.outlier
        return f

    def versions(self, night: int) -> dict[str, str]:
        return NEW if self.upgrade_night and night >= self.upgrade_night else OLD


def when(night: int, minutes: int = 0) -> datetime:
    return START + timedelta(days=night - 1, minutes=minutes)


def _record(verb: str, host: str, night: int, versions: dict, minutes: int, label=None,
            **env) -> RunRecord:  # fmt: skip
    at = when(night, minutes)
    stamp = at.strftime("%Y%m%dT%H%M%SZ")
    return RunRecord(
        run_id=f"{stamp}-{verb}-{host}-n{night:03d}", verb=verb, host=host,
        started_at=(at - timedelta(minutes=1)).isoformat(), finished_at=at.isoformat(),
        label=label, env={"hostname": host, "gpu_model": "NVIDIA H200", "gpu_count": 8,
                          **versions, **env},
    )  # fmt: skip


def snapshot(host: str, night: int, plan: Plan) -> Bundle:
    """The nightly ``host`` run before the measurements (its versions are the host's)."""
    return Bundle(_record("host", host, night, plan.versions(night), minutes=-30))


def result(night: int, plan: Plan, concurrency: int, tpot_ms: float = 40.0,
           ttft_ms: float = 250.0) -> dict:  # fmt: skip
    """A ``vllm bench serve --save-result`` JSON of that night at one concurrency: TPOT
    (and ITL, and so output throughput) follow the plan, TTFT is noise alone."""
    tpot = tpot_ms * plan.factors(concurrency)[night - 1]
    ttft = ttft_ms * plan.factors(concurrency + 1, moves=False)[night - 1]
    prompts, in_len, out_len = 10 * concurrency, 1024, 128
    duration = prompts / concurrency * (ttft + tpot * out_len) / 1000
    return {
        "date": when(night).strftime("%Y%m%d-%H%M%S"), "backend": "vllm", "model_id": MODEL,
        "tokenizer_id": MODEL, "num_prompts": prompts, "request_rate": "inf",
        "burstiness": 1.0, "max_concurrency": concurrency, "duration": duration,
        "completed": prompts, "failed": 0, "total_input_tokens": prompts * in_len,
        "total_output_tokens": prompts * out_len, "request_throughput": prompts / duration,
        "output_throughput": prompts * out_len / duration,
        "total_token_throughput": prompts * (in_len + out_len) / duration,
        "mean_ttft_ms": ttft * 1.1, "median_ttft_ms": ttft, "p99_ttft_ms": ttft * 2,
        "mean_tpot_ms": tpot * 1.02, "median_tpot_ms": tpot, "p99_tpot_ms": tpot * 1.3,
        "mean_itl_ms": tpot * 1.01, "median_itl_ms": tpot * 0.98, "p99_itl_ms": tpot * 2,
        "tp": "8", "ep": "true",
    }  # fmt: skip


def sweep(host: str, night: int, plans: dict[int, Plan], versions: Plan) -> Bundle:
    """One night's ``vllm-bench`` run: a result per concurrency (``plans``), parsed by
    vLLM's result parser as an import is; ``versions`` says which vLLM served it."""
    version = versions.versions(night)["vllm"]
    rows = []
    for concurrency, plan in plans.items():
        obj = result(night, plan, concurrency)
        rows.append(results.to_row(obj, f"c{concurrency}-night{night:03d}.json",
                                   results.layout_from_metadata(obj), version, "vllm", "json"))  # fmt: skip
    record = _record("vllm-bench", host, night, versions.versions(night), minutes=15)
    return Bundle(record, {"serving_bench": rows})


def snapshots(host: str, plan: Plan) -> list[Bundle]:
    """``host`` runs on night 1 and on the upgrade night (cron runs it nightly; the
    versions between are the same, so two snapshots date every change)."""
    nights = sorted({1, plan.upgrade_night or 1})
    return [snapshot(host, n, plan) for n in nights]


def trace(tmp: Path, host: str, night: int, plan: Plan, steps: int = 5) -> Bundle:
    """A decode trace of that night (GEMM, attention, fused MoE, AllReduce per step), MoE
    time following the plan, read by the real trace importer."""
    rng = np.random.default_rng(night * 7 + plan.seed)
    moe = 200.0 * plan.factors(99)[night - 1]
    nccl = plan.versions(night)["nccl"]
    b = TraceBuilder(rank=0, world_size=1)
    b.meta["distributedInfo"]["nccl_version"] = nccl
    t = 1000.0
    for i in range(steps):
        durs = [50.0 * (1 + plan.cv * rng.standard_normal()) for _ in range(3)]
        kernels = ((GEMM, durs[0]), (FLASH, durs[1]), (MOE, moe), (AR, durs[2]))
        total = sum(d for _, d in kernels) + 4 * 2.0
        b.cpu("user_annotation", f"execute_context_0(0)_generation_{32 + i}({32 + i})", t,
              total + 5)  # fmt: skip
        gpu = t + 3.0
        for name, dur in kernels:
            b.kernel(name, gpu - 2.0, gpu, dur)
            gpu += dur + 2.0
        t += total + 500.0
    path = b.write(tmp / f"{host}-night{night:03d}.json")
    tables = ingest_traces([path]).tables
    # As collectors/trace/command.py's trace_env: NCCL from the trace, no torch or vLLM
    # (the importer's are not the traced job's); the host snapshot supplies those.
    record = _record("trace", host, night, {}, minutes=45, label="decode-bench", torch=None,
                     vllm=None, nccl=nccl, driver_version=None)  # fmt: skip
    return Bundle(record, tables)


def nccl_tests_file(tmp: Path, host: str, night: int, plan: Plan) -> Path:
    """An 8-rank all_reduce_perf ``-J`` file of that night (1 MiB and 64 MiB, bf16; one GPU
    per process, as mpirun -np 8 runs it)."""
    f = plan.factors(7)[night - 1]
    rows = []
    for size, base_us in ((1 << 20, 30.0), (64 << 20, 420.0)):
        us = base_us * f
        alg = size / (us * 1e3)
        rows.append({"size": size, "count": size // 2, "type": "bfloat16", "redop": "sum",
                     "root": "    -1", "out_of_place": {"time": us, "alg_bw": alg,
                     "bus_bw": alg * 2 * 7 / 8, "nwrong": 0.0},
                     "in_place": {"time": us * 1.01, "alg_bw": alg / 1.01,
                                  "bus_bw": alg * 2 * 7 / 8 / 1.01, "nwrong": 0.0}})  # fmt: skip
    doc = {
        "version": 2, "start_time": when(night, 10).strftime("%Y-%m-%d %H:%M:%S"),
        "end_time": when(night, 11).strftime("%Y-%m-%d %H:%M:%S"),
        "args": ["./build/all_reduce_perf", "-b", "1M", "-e", "64M", "-g", "1", "-J", "out.json"],
        "env": ["NCCL_DEBUG=WARN"], "nccl_version": NCCL_CODE[plan.versions(night)["nccl"]],
        "config": {"nthreads": 1, "ngpus": 1, "iterations": 20, "graph": 0,
                   "devices": [{"rank": r, "hostname": host, "device": r,
                                "device_info": "NVIDIA H200"} for r in range(8)]},
        "results": rows, "average_bus_bandwidth": {"bandwidth": 1.0, "okay": "unchecked"},
    }  # fmt: skip
    path = tmp / f"{host}-allreduce-night{night:03d}.json"
    path.write_text(json.dumps(doc))
    return path


def commit(store: Path | str, bundles: Iterable[Bundle]) -> None:
    """Spool every bundle as a collector does, then commit the spool (store.commit.flush)."""
    loc = resolve(store)
    for bundle in bundles:
        write_spool(bundle, loc.spool_dir)
    report = flush(loc)
    assert not report.failed and not report.moved_aside, report


def serving_history(store: Path | str, host: str, plans: dict[int, Plan], versions: Plan) -> None:
    bundles = snapshots(host, versions)
    bundles += [sweep(host, n, plans, versions) for n in range(1, versions.nights + 1)]
    commit(store, bundles)


def trace_history(store: Path, tmp: Path, host: str, plan: Plan) -> None:
    commit(store, [*snapshots(host, plan),
                   *(trace(tmp, host, n, plan) for n in range(1, plan.nights + 1))])  # fmt: skip
