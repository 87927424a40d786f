"""The benchmark on the engine, step by step: each engine's scheduler as its source has it.

``simulate`` runs the benchmark client (planner.sched.bench) against one engine instance's
scheduler (an adapter per engine: planner.sched.vllm, sglang, trtllm, sharing
planner.sched.core) and returns the :class:`Schedule`: what every step held, in steps, and
when each request was sent, got its first token and ended. It knows nothing of time:
planner.cost prices the steps with the one model of bytes and FLOPs, and the benchmark's
definitions (planner.sched.metrics) turn them into TTFT, TPOT, ITL and E2EL. A schedule
depends only on the workload, the engine's limits and the KV room, so it is computed once
and kept (``functools.lru_cache``) while the fitted parameters or a calibration change.
"""

from __future__ import annotations

from functools import lru_cache

from planner.sched.bench import BENCHES, DEFAULT_BENCH, bench, lengths
from planner.sched.core import Caps, Schedule, Sim
from planner.sched.sglang import SglangScheduler
from planner.sched.trtllm import TrtllmScheduler
from planner.sched.vllm import VllmScheduler

__all__ = ["BENCHES", "DEFAULT_BENCH", "Caps", "Schedule", "simulate"]

ADAPTERS = {"vllm": VllmScheduler, "sglang": SglangScheduler, "trtllm": TrtllmScheduler}


@lru_cache(maxsize=4096)
def simulate(engine: str, bench_name: str, isl: int, osl: int, ratio: float, num_prompts: int,
             clients: int, ranks: int, caps: Caps, converge: bool = True) -> Schedule:  # fmt: skip
    """The benchmark (``bench_name`` with ``--random-input-len isl --random-output-len osl
    --random-range-ratio ratio --num-prompts num_prompts --max-concurrency clients``; 0
    prompts: the tool's default) against ``engine`` with ``ranks`` attention-DP ranks."""
    b = bench(bench_name)
    n = b.prompts(clients, num_prompts)
    ins, outs = lengths(b, isl, osl, ratio, n)
    return Sim(ADAPTERS[engine](), caps, clients, ranks, ins, outs, converge).run()
