"""The serving cost model: mean TPOT, TTFT and output throughput of one engine instance.

Every number the planner gives comes from :func:`predict`: ``python -m planner predict``,
the Tradeoff calculator's layouts (planner.tradeoff.instances), recommendations, crossovers,
policy costs, calibrated mode and the published-figures comparison.

Two layers. The benchmark on the engine, step by step (planner.sched: the client's closed
loop and each engine's scheduler as its source has it) says what every step holds and when
each request is sent, gets its first token and ends. The one model of bytes and FLOPs
prices each step (planner.cost.step.step_terms: its decode ops, its prompt tokens' compute, its
collectives on this host's measured, published, derived or spec-sheet curves). The
benchmark's definitions (planner.sched.metrics) then give TTFT, TPOT, ITL and E2EL, their
means and percentiles; the request path outside the GPU (HTTP, tokenizer) is added to TTFT.
What is fitted (planner.cost.params) belongs to the GPU and that request path, never to a
scheduler's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.params import FITTED, ServingParams
from planner.cost.step import kv_store_per_seq, step_ms, step_terms, weights_per_gpu
from planner.cost.step_comm import A2A_BACKENDS, step_comm
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.sched import Caps, Schedule, simulate
from planner.sched.bench import bench, check_ratio, mean_lengths
from planner.sched.metrics import Shapes, measure, segment_weights
from planner.specs.engines import ENGINES
from planner.specs.hardware import GIB, HardwareSpec
from planner.specs.models import ModelSpec, dtype_bytes

__all__ = ["ENGINES", "TERMS", "Prediction", "ServeLayout", "Workload", "check", "predict"]

TERMS = ("attention", "kv_cache", "mlp", "experts", "expert_imbalance", "lm_head", "prefill",
         "allreduce", "all_to_all")  # fmt: skip
COMM_TERMS = ("allreduce", "all_to_all")
COLLECTIVE_BACKENDS = ("all_reduce", "all_reduce_fast")


@dataclass
class Prediction:
    concurrency: np.ndarray
    tpot_ms: np.ndarray
    ttft_ms: np.ndarray
    output_tok_s: np.ndarray
    running: np.ndarray  # requests the engine runs at once, time-weighted (per attention rank)
    kv_capacity_seqs: float
    weights_per_gpu_gb: float
    breakdown_ms: dict[str, np.ndarray]
    dummy_ranks: np.ndarray  # idle attention-DP ranks running a 1-token dummy pass
    admitted: np.ndarray  # True where no request waited for KV room or the running cap
    allreduce_calls: int = 0
    collectives: list[tuple[str, int]] = field(default_factory=list)  # (op, world size)
    itl_ms: np.ndarray | None = None  # mean gap between two tokens (pooled over requests)
    e2el_ms: np.ndarray | None = None  # mean request latency
    # p50 / p90 / p99 of the requests' ttft_ms, tpot_ms, e2el_ms, as the benchmark reports them
    percentiles: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    queued: np.ndarray | None = None  # requests sent and not started, per attention rank
    simulation: list[dict] = field(default_factory=list)  # per simulated concurrency
    simulated: np.ndarray | None = None  # the concurrencies simulated (others interpolated)


def check(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload) -> None:
    """One clear line for what this model cannot represent; never a guess."""
    limit = hw.max_gpus or hw.gpu_count
    if min(lay.tp, lay.dp, lay.moe_ep) < 1 or lay.gpus > limit:
        raise PlannerInputError(f"layout {lay.describe()} needs {lay.gpus} GPUs; host "
                                f"{hw.name!r} has {limit}")  # fmt: skip
    if lay.moe_ep > 1 and not m.num_experts:
        raise PlannerInputError(f"--ep: model {m.name!r} has no routed experts")
    if m.num_experts and lay.moe_ep > 1 and m.num_experts % lay.moe_ep:
        raise PlannerInputError(f"--ep: {m.num_experts} experts do not split over "
                                f"{lay.moe_ep} ranks")  # fmt: skip
    if m.attention == "gqa" and m.num_heads % lay.tp:
        raise PlannerInputError(f"--tp {lay.tp}: {m.num_heads} attention heads do not "
                                "split evenly")  # fmt: skip
    if w.isl < 1 or w.osl < 2:
        raise PlannerInputError("--isl must be >= 1 and --osl >= 2")
    if m.max_context and w.isl + w.osl > m.max_context:
        raise PlannerInputError(f"--isl {w.isl} + --osl {w.osl} exceeds {m.name}'s context "
                                f"of {m.max_context} tokens")  # fmt: skip
    if w.engine not in ENGINES:
        raise PlannerInputError(f"--engine {w.engine!r}: one of {', '.join(ENGINES)}")
    check_budget(w.engine, w.isl, w.token_budget)
    check_client(w.bench, w.range_ratio, w.num_prompts, w.max_running)
    if w.adp_balance_iters < 0 or (w.adp_balance_iters and (w.engine != "trtllm" or lay.dp < 2)):
        raise PlannerInputError("--adp-balance-iters: TensorRT-LLM's attention-DP balance, "
                                "a timeout >= 0 with --engine trtllm and --dp >= 2")  # fmt: skip
    if w.recv_interval < 1 or (w.recv_interval > 1 and w.engine != "sglang"):
        raise PlannerInputError("--scheduler-recv-interval: SGLang's, >= 1 with --engine "
                                "sglang")  # fmt: skip
    check_batch_wait(w, lay.dp)
    if lay.a2a and lay.a2a not in A2A_BACKENDS:
        raise PlannerInputError(f"--all2all-backend {lay.a2a!r}: one of "
                                f"{', '.join(A2A_BACKENDS)}")  # fmt: skip
    if lay.a2a and lay.moe_ep <= 1:
        raise PlannerInputError(f"--all2all-backend {lay.a2a}: needs --ep")
    if lay.a2a.startswith("deepep") and lay.dp == 1 and w.engine == "vllm":
        raise PlannerInputError(
            f"--all2all-backend {lay.a2a} at --dp 1: vLLM runs all-to-all only when DP > 1 "
            "(the MoE output is all-reduced); TP attention + DeepEP MoE is SGLang's "
            "(--engine sglang)")  # fmt: skip
    if lay.allreduce not in COLLECTIVE_BACKENDS:
        raise PlannerInputError(f"AllReduce backend {lay.allreduce!r}: one of "
                                f"{', '.join(COLLECTIVE_BACKENDS)}")  # fmt: skip


def check_batch_wait(w: Workload, dp: int) -> None:
    """One clear line for TensorRT-LLM batch-waiting settings it would not run with."""
    iters, ratio = w.batch_wait_iters, w.batch_wait_ratio
    if iters < 0 or not 0.0 <= ratio <= 1.0:
        raise PlannerInputError("--batch-wait-iters must be >= 0 and --batch-wait-ratio "
                                "between 0 and 1")  # fmt: skip
    if (iters or ratio) and (w.engine != "trtllm" or dp > 1):
        raise PlannerInputError("--batch-wait-iters / --batch-wait-ratio: TensorRT-LLM's "
                                "batch waiting, with --engine trtllm and --dp 1")  # fmt: skip


def check_client(bench_name: str, range_ratio: float, num_prompts: int,
                 max_running: int) -> None:  # fmt: skip
    """One clear line for a benchmark client or a running cap the tools would refuse."""
    b = bench(bench_name)
    if range_ratio >= 0:
        check_ratio(b, range_ratio)
    if num_prompts < 0 or max_running < 0:
        raise PlannerInputError("--num-prompts and --max-running-requests must be >= 0")


def check_budget(engine: str, isl: int, token_budget: int) -> None:
    """One clear line for a token budget the engine would not start with or run."""
    if token_budget < 0:
        raise PlannerInputError("--token-budget must be >= 0 (0 = the engine's default)")
    if engine == "trtllm" and 0 < token_budget < isl:
        # NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm.py ``_check_arguments``: without chunked
        # prefill (its default) "The sum of prompt length ... should not exceed max_num_tokens".
        raise PlannerInputError(
            f"--token-budget {token_budget} < --isl {isl}: TensorRT-LLM (chunked prefill off "
            "by default) refuses a prompt longer than --max_num_tokens")  # fmt: skip


def kv_capacity(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload,
                p: ServingParams) -> tuple[float, float]:  # fmt: skip
    """(weights per GPU in bytes, sequences of I + O/2 tokens the KV cache admits per rank);
    one clear line when the layout does not fit."""
    held = weights_per_gpu(m, lay)
    budget = ENGINES[w.engine].kv_budget_bytes(hw, held, lay.tp, w.isl, p.memory_utilization,
                                               p.reserve_gb * 1e9, w.token_budget)  # fmt: skip
    if budget <= 0:
        raise PlannerInputError(
            f"{m.name} does not fit on {lay.gpus}x {hw.gpu_model} as {lay.describe()}: "
            f"{held / GIB:.0f} GiB of weights per GPU, "
            f"{hw.memory_bytes * p.memory_utilization / GIB:.0f} GiB usable")  # fmt: skip
    kv_b = dtype_bytes(w.kv_dtype or m.native.kv_cache)
    held_tokens = w.isl + (w.osl if ENGINES[w.engine].reserve_whole else w.osl / 2.0)
    cap = budget / max(kv_store_per_seq(m, held_tokens, kv_b, lay.tp), 1.0)
    if cap < 1:
        raise PlannerInputError(
            f"{m.name} as {lay.describe()} on {hw.gpu_model}: the KV cache left after "
            f"the weights ({budget / GIB:.1f} GiB per GPU) cannot hold one "
            f"{w.isl}+{w.osl}-token sequence")  # fmt: skip
    return held, cap


def predict(
    m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, conc: np.ndarray,
    p: ServingParams = FITTED, comm: CommSet | None = None,
) -> Prediction:  # fmt: skip
    """TPOT / TTFT / output tokens/s at each client concurrency; where ``p`` holds in a window
    of concurrencies, its ``outside`` values predict the rest and the two are mixed by the
    window's weight in between (planner.cost.params.Window)."""
    if p.window is None:
        return _predict(m, hw, lay, w, conc, p, comm)
    c = np.asarray(conc, dtype=float)
    carried = p.window.weight(c)
    moved = _predict(m, hw, lay, w, c, p.with_values(window=None), comm)
    if (carried == 1).all():
        return moved
    kept = predict(m, hw, lay, w, c, p.window.outside, comm)

    def mix(a, b):  # exactly one side where the weight is 1 or 0 (the other may be NaN)
        return np.select([carried >= 1, carried <= 0], [a, b], carried * a + (1 - carried) * b)

    return replace(moved, **{f: mix(getattr(moved, f), getattr(kept, f)) for f in MIXED},
                   breakdown_ms={t: mix(v, kept.breakdown_ms[t])
                                 for t, v in moved.breakdown_ms.items()},
                   percentiles={k: {q: mix(v, kept.percentiles[k][q]) for q, v in d.items()}
                                for k, d in moved.percentiles.items()})  # fmt: skip


# What a calibration's factors change (mixed across its window); the rest (memory,
# admission, the schedule) is the same on either side.
MIXED = ("tpot_ms", "ttft_ms", "output_tok_s", "itl_ms", "e2el_ms")
# Concurrencies simulated as asked up to EXACT_UP_TO a rank; above it, powers of two, the others
# interpolated between the two around them (log-log). Fixed nodes, so a concurrency's answer
# does not depend on which others were asked with it (a plan over 1..512 and a predict at
# one of its points agree).
EXACT_UP_TO = 8


def engine_caps(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, cap: float,
                clients: int) -> Caps:  # fmt: skip
    """The engine's limits per attention rank; limits ``clients`` can never reach are left
    out, so workloads that differ only there share one schedule."""
    eng = ENGINES[w.engine]
    held = w.isl + (w.osl if eng.reserve_whole else w.osl / 2.0)
    kv_tokens = int(cap * held)
    context = m.max_context or (w.isl + w.osl)
    running = eng.max_running(hw, kv_tokens, context, lay.dp, w.max_running)
    per_rank = -(-clients // lay.dp)
    if kv_tokens >= per_rank * (w.isl + w.osl + 1):
        kv_tokens = UNBOUNDED
    if running >= per_rank:
        running = UNBOUNDED
    return Caps(token_budget=eng.token_budget(hw, w.isl, lay.dp, w.token_budget),
                max_running=running, kv_tokens=kv_tokens, recv_interval=w.recv_interval,
                batch_wait_iters=w.batch_wait_iters, batch_wait_ratio=w.batch_wait_ratio,
                adp_balance_iters=w.adp_balance_iters)  # fmt: skip


UNBOUNDED = 1 << 40


def schedule(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, cap: float,
             clients: int) -> Schedule:  # fmt: skip
    """The benchmark on the engine at ``clients`` concurrency (planner.sched, cached)."""
    b = bench(w.bench)
    ratio = b.range_ratio if w.range_ratio < 0 else w.range_ratio
    return simulate(w.engine, w.bench, w.isl, w.osl, ratio, w.num_prompts, int(clients),
                    lay.dp, engine_caps(m, hw, lay, w, cap, clients))  # fmt: skip


def grid(c: np.ndarray, dp: int = 1) -> np.ndarray:
    """The concurrencies simulated for ``c``: each one up to EXACT_UP_TO per attention rank
    or a power of two, else the powers of two either side of it."""
    u = np.unique(c)
    k = np.log2(u)
    exact = (u <= EXACT_UP_TO * dp) | (k == np.round(k))
    return np.unique(np.concatenate([u[exact], 2.0 ** np.floor(k[~exact]),
                                     2.0 ** np.ceil(k[~exact])]))  # fmt: skip


def _predict(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, conc: np.ndarray,
             p: ServingParams, comm: CommSet | None) -> Prediction:  # fmt: skip
    check(m, hw, lay, w)
    comm = comm if comm is not None else CommSet([], hw, p.link_eff)
    c = np.asarray(conc, dtype=float)
    held, cap = kv_capacity(m, hw, lay, w, p)
    sims = grid(c, lay.dp)
    scheds = [schedule(m, hw, lay, w, cap, int(x)) for x in sims]
    _, mean_out = mean_lengths(bench(w.bench), w.isl, w.osl, _ratio(w))
    terms = step_terms(m, hw, lay, lengths_priced(w), p, comm,
                       Shapes(*(np.concatenate([getattr(s, f) for s in scheds])
                                for f in SHAPE_FIELDS)))  # fmt: skip
    per_step = step_ms(terms)
    fixed_ms = p.ttft_fixed_ms.get(w.engine, p.ttft_fixed_ms["vllm"])
    cols: dict[str, list[float]] = {k: [] for k in (*MIXED, "running", "queued")}
    pct: dict[str, dict[str, list[float]]] = {}
    parts: dict[str, list[float]] = {t: [] for t in TERMS}
    lo = 0
    for x, s in zip(sims, scheds, strict=True):
        hi = lo + s.steps.size
        got = measure(s, per_step[lo:hi], fixed_ms)
        tw = segment_weights(s)["tpot"]
        for t in TERMS:
            parts[t].append(float(tw @ terms[t][lo:hi]))
        for k, v in (("tpot_ms", got.tpot_ms), ("ttft_ms", got.ttft_ms),
                     ("itl_ms", got.itl_ms), ("e2el_ms", got.e2el_ms),
                     ("output_tok_s", x * mean_out / got.e2el_ms * 1e3),
                     ("running", got.running_mean), ("queued", got.queued_mean)):  # fmt: skip
            cols[k].append(v)
        for k, d in got.percentiles.items():
            for q, v in d.items():
                pct.setdefault(k, {}).setdefault(q, []).append(v)
        lo = hi

    def at(v: list[float]) -> np.ndarray:  # the simulated values at the asked concurrencies
        return np.interp(np.log(c), np.log(sims), np.asarray(v, dtype=float))

    admitted = np.interp(np.log(c), np.log(sims), [float(s.blocked == 0) for s in scheds])
    dummy = np.maximum(lay.dp - c, 0.0) if lay.dp > 1 else np.zeros_like(c)
    sc_ops = step_comm(m, lay, w, np.ones(1), comm)
    return Prediction(
        c, at(cols["tpot_ms"]), at(cols["ttft_ms"]), at(cols["output_tok_s"]), at(cols["running"]),
        float(cap), held / 1e9, {t: at(v) for t, v in parts.items()}, dummy, admitted >= 1.0,
        sc_ops.allreduce_calls, sc_ops.ops, itl_ms=at(cols["itl_ms"]), e2el_ms=at(cols["e2el_ms"]),
        percentiles={k: {q: at(v) for q, v in d.items()} for k, d in pct.items()},
        queued=at(cols["queued"]),
        simulation=[_sim_note(s) for s in scheds], simulated=sims,
    )  # fmt: skip


SHAPE_FIELDS = ("batch", "context", "moe_tokens", "prefill_max", "prefill_sum")


def lengths_priced(w: Workload) -> Workload:
    """``w`` as a step prices it: a prompt token's attention at the mean drawn prompt."""
    mean_in, _ = mean_lengths(bench(w.bench), w.isl, w.osl, _ratio(w))
    return replace(w, isl=max(int(round(mean_in)), 1))


def _ratio(w: Workload) -> float:
    return bench(w.bench).range_ratio if w.range_ratio < 0 else w.range_ratio


def _sim_note(s: Schedule) -> dict:
    """What the simulation ran, for the output: requests simulated of the benchmark's, and
    where the steady state converged (the windows after it stood in for the rest)."""
    return {"clients": s.clients, "prompts": s.prompts, "requests_simulated": s.simulated,
            "converged_after_requests": s.converged_after}  # fmt: skip


# A run that was measured did load: where the weights leave no KV room at the engine's
# default memory rule, the engine must have been launched with a higher memory fraction.
LOADED_MEMORY_UTILIZATION, LOADED_RESERVE_GB = 0.98, 1.0


def params_for_loaded_run(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, engine: str,
                          base: ServingParams = FITTED) -> tuple[ServingParams, str | None]:  # fmt: skip
    """``base``, or (for a measured run whose weights leave no KV room at the engine's default
    memory rule) ``base`` at 0.98 of the GPU with a 1 GB reserve, with the note that says so."""
    try:
        kv_capacity(m, hw, lay, Workload(1, 2, engine), base)
        return base, None
    except PlannerInputError:
        pass
    note = (f"weights leave no KV room at the engine's default memory fraction; predicted at "
            f"{LOADED_MEMORY_UTILIZATION:g} with a {LOADED_RESERVE_GB:g} GB reserve (the run "
            "shows it loaded)")  # fmt: skip
    return base.with_values(memory_utilization=LOADED_MEMORY_UTILIZATION,
                            reserve_gb=LOADED_RESERVE_GB), note  # fmt: skip
