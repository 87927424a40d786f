"""The serving cost model: mean TPOT, TTFT and output throughput of one engine instance.

Every number the planner gives comes from :func:`predict`: ``python -m planner predict``,
the Tradeoff calculator's layouts (planner.tradeoff.instances), recommendations, crossovers,
policy costs, calibrated mode and the published-figures comparison.

A decode step on the busiest GPU = its compute ops (planner.cost.step) + its collectives
(planner.cost.step_comm, on this host's measured, published, derived or spec-sheet curves)
+ prefill interference: in steady state about B x I / O prompt tokens join each decode step,
compute-bound at the format's tensor peak (their routed experts spread over the MoE group, so
under attention DP every busy rank's prompts load every GPU; SGLang adds the weights of the
separate prompt passes its decode batch waits for). TTFT follows the client's waves, the engine's
token budget and KV admission (planner.cost.ttft); there a prompt token costs its compute and
its activations' collectives (planner.cost.step_comm.prefill_comm).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.params import FITTED, ServingParams
from planner.cost.step import (
    decode_terms,
    kv_store_per_seq,
    prefill_cost,
    weights_per_gpu,
)
from planner.cost.step_comm import A2A_BACKENDS, prefill_comm, step_comm
from planner.cost.ttft import (
    adp_balance_wait_steps,
    batch_wait,
    prefill_share,
    recv_pooled_prompts,
    recv_wait_steps,
    ttft_ms,
)
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
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
    running: np.ndarray  # sequences the engine runs at once (per attention rank)
    kv_capacity_seqs: float
    weights_per_gpu_gb: float
    breakdown_ms: dict[str, np.ndarray]
    dummy_ranks: np.ndarray  # idle attention-DP ranks running a 1-token dummy pass
    admitted: np.ndarray  # True where every client's request runs at once (no KV wait)
    allreduce_calls: int = 0
    collectives: list[tuple[str, int]] = field(default_factory=list)  # (op, world size)


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
    """Mean TPOT / TTFT / output tokens/s at each client concurrency (vectorised); where
    ``p`` holds in a window of concurrencies, its ``outside`` values predict the rest and the
    two are mixed by the window's weight in between (planner.cost.params.Window)."""
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

    def pick(a, b):  # what the factors do not change (memory, admission), from either side
        return np.where(carried > 0, a, b)

    return replace(moved, tpot_ms=mix(moved.tpot_ms, kept.tpot_ms),
                   ttft_ms=mix(moved.ttft_ms, kept.ttft_ms),
                   output_tok_s=mix(moved.output_tok_s, kept.output_tok_s),
                   running=pick(moved.running, kept.running),
                   dummy_ranks=pick(moved.dummy_ranks, kept.dummy_ranks),
                   admitted=pick(moved.admitted, kept.admitted),
                   breakdown_ms={t: mix(v, kept.breakdown_ms[t])
                                 for t, v in moved.breakdown_ms.items()})  # fmt: skip


def _predict(m: ModelSpec, hw: HardwareSpec, lay: ServeLayout, w: Workload, conc: np.ndarray,
             p: ServingParams, comm: CommSet | None) -> Prediction:  # fmt: skip
    check(m, hw, lay, w)
    comm = comm if comm is not None else CommSet([], hw, p.link_eff)
    eng = ENGINES[w.engine]
    c = np.asarray(conc, dtype=float)
    held, cap = kv_capacity(m, hw, lay, w, p)
    want = np.ceil(c / lay.dp)  # clients per attention rank
    B = np.minimum(want, max(np.floor(cap), 1.0))  # running sequences per attention rank

    # Under attention DP the step waits for the busiest rank (ceil(C / DP) sequences), while
    # the MoE runs the C tokens there are (an idle rank sends a dummy one), not DP x that.
    moe_tokens = np.minimum(np.maximum(c, lay.dp), B * lay.dp)
    terms = decode_terms(m, hw, lay, w, B, p, moe_tokens)
    cost = prefill_cost(m, hw, lay, w, p)
    ranks = np.minimum(c, lay.dp)  # attention ranks with requests
    budget = eng.token_budget(hw, w.isl, lay.dp, w.token_budget)
    ones = np.ones(1)
    fixed_terms = decode_terms(m, hw, lay, w, ones, p)
    fixed_comm = step_comm(m, lay, w, ones, comm, p.allreduce_scale, p.a2a_scale)
    step_fixed = float(sum(v[0] for v in fixed_terms.values()) + fixed_comm.allreduce_ms[0]
                       + fixed_comm.all_to_all_ms[0])  # fmt: skip
    own_comm, rank_comm = prefill_comm(m, lay, w, min(budget, w.isl), comm, fixed_comm,
                                       p.allreduce_scale, p.a2a_scale)  # fmt: skip
    # TTFT's prompt token: compute and its collectives (TPOT costs the steady-state prompt
    # tokens' collectives in step_comm below, so its interference takes compute only).
    ttft_cost = cost.plus(own_comm, rank_comm)
    t_tok = ttft_cost.per_token(ranks)  # a prompt token while every busy rank prefills too

    prefill_tok = B * (w.isl / w.osl) if w.isl > 1 else np.zeros_like(c)
    terms["prefill"] = prefill_tok * cost.per_token(ranks)
    if not eng.mixed and w.isl > 1:
        # SGLang runs prompts as a forward pass of their own, first whenever one can start
        # (scheduler.py ``get_next_batch_to_run``: "Run prefill first if possible"), one
        # pass between two decode steps: the decode batch also waits for that pass's weights.
        passes = np.minimum(B * np.ceil(w.isl / budget) / w.osl, 1.0)
        terms["prefill"] = terms["prefill"] + passes * step_fixed
    sc = step_comm(m, lay, w, B + prefill_tok, comm, p.allreduce_scale, p.a2a_scale)
    terms["allreduce"], terms["all_to_all"] = sc.allreduce_ms, sc.all_to_all_ms
    tpot = np.sum([terms[t] for t in TERMS], axis=0)

    ratio = p.prompts_per_slot(w.engine)
    k = w.num_prompts / c if w.num_prompts else np.full_like(c, ratio)
    fixed_ms = p.ttft_fixed_ms.get(w.engine, p.ttft_fixed_ms["vllm"])

    def rank_ttft(b: np.ndarray, clients: np.ndarray) -> np.ndarray:
        """Mean TTFT on an attention rank running ``b`` of its ``clients`` requests."""
        # A later prompt meets the other ranks mostly decoding: each is prefilling a share
        # rho of the time (its prompts' prefill over their lifetimes), the mean overlap its
        # own prompt's experts share the GPUs with.
        rho = prefill_share(b, w.isl * ttft_cost.per_token(1), w.osl, tpot)
        t_own = ttft_cost.per_token(1 + (ranks - 1) * rho)
        batch_held, batch_pooled = batch_wait(b, w.isl, w.osl, budget, w.batch_wait_iters,
                                              w.batch_wait_ratio)  # fmt: skip
        wait = (adp_balance_wait_steps(b, lay.dp, w.osl, w.adp_balance_iters)
                + recv_wait_steps(w.recv_interval) + batch_held)  # fmt: skip
        pooled = recv_pooled_prompts(b, w.osl, w.recv_interval) + batch_pooled
        return ttft_ms(eng, b, clients, w.isl, w.osl, budget, tpot, step_fixed, t_tok, t_own,
                       fixed_ms, k, wait, pooled)  # fmt: skip

    ttft = rank_ttft(B, want)
    # C clients over DP ranks: C mod DP ranks hold ceil(C / DP), the others floor(C / DP); the
    # mean over clients weighs each kind of rank by its clients (the step is the busiest's).
    lo = np.floor(c / lay.dp)
    mixed = (lo >= 1) & (want > lo)
    if mixed.any():
        lo_b = np.minimum(np.maximum(lo, 1.0), max(np.floor(cap), 1.0))
        busiest_share = (c - lay.dp * lo) * want / c
        ttft = np.where(mixed, busiest_share * ttft
                        + (1 - busiest_share) * rank_ttft(lo_b, np.maximum(lo, 1.0)), ttft)  # fmt: skip
    # Little's law over the closed loop: every client gets osl tokens per request lifetime,
    # queueing for a KV slot included (the admission wait is in ttft), so past the KV
    # capacity the rate stays at the running sequences' (B x DP / TPOT), it does not fall.
    out_tok_s = c * w.osl / (ttft + (w.osl - 1) * tpot) * 1e3
    dummy = np.maximum(lay.dp - c, 0.0) if lay.dp > 1 else np.zeros_like(c)
    return Prediction(c, tpot, ttft, out_tok_s, B, float(cap), held / 1e9, terms, dummy,
                      want <= B, sc.allreduce_calls, sc.ops)  # fmt: skip


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
