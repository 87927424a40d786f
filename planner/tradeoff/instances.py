"""Every Tradeoff layout as a serving-model instance: a ServeLayout, a collective backend,
the engine that launches it, and the ``python -m planner predict`` command that answers it.

``tp`` -> TP=n; ``tp_fast_allreduce`` -> TP=n on the custom / PCIe-IPC AllReduce;
``tp_ep_dp1`` -> TP=n with EP=n MoE (the MoE output still all-reduced, vLLM at DP=1);
``tp_attn_ep_moe`` -> TP=n attention, EP=n MoE with DeepEP dispatch/combine (SGLang);
``dp_attn_ep`` -> attention DP=n with EP=n over its all2all backend; ``tp_dp`` -> dp
independent replicas of TP=k, each serving C / dp; a downcast -> its base with the one
lossy change (FP8 KV cache, FP8 dispatch/combine, W4A8 Marlin inputs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.cost.comm import CommSet
from planner.cost.expert_load import ExpertLoad
from planner.cost.params import FITTED, ServingParams
from planner.cost.serving import Prediction, ServeLayout, Workload, predict
from planner.specs.models import ModelSpec
from planner.tradeoff.layouts import Layout


@dataclass(frozen=True)
class Instance:
    serve: ServeLayout
    replicas: int
    workload: Workload

    def predict_args(self) -> list[str]:
        """The flags of ``python -m planner predict`` that ask for this instance."""
        s, w = self.serve, self.workload
        args = ["--tp", str(s.tp), "--dp", str(s.dp)] + (["--ep"] if s.moe_ep > 1 else [])
        if s.a2a:
            args += ["--all2all-backend", s.a2a]
        if s.allreduce == "all_reduce_fast":
            args += ["--allreduce", "fast"]
        if self.replicas > 1:
            args += ["--replicas", str(self.replicas)]
        args += ["--engine", w.engine, "--isl", str(w.isl), "--osl", str(w.osl)]
        if w.kv_dtype:
            args += ["--kv-dtype", "fp8"]
        if w.a2a_dtype:
            args += ["--a2a-dtype", "fp8"]
        if w.activations:
            args += ["--marlin-input-dtype", "fp8"]
        if w.num_prompts:
            args += ["--num-prompts", str(w.num_prompts)]
        if w.token_budget:
            args += ["--token-budget", str(w.token_budget)]
        if w.max_running:
            args += ["--max-running-requests", str(w.max_running)]
        if w.bench != "inferencex":
            args += ["--bench", w.bench]
        if w.range_ratio >= 0:
            args += ["--range-ratio", f"{w.range_ratio:g}"]
        if w.adp_balance_iters:
            args += ["--adp-balance-iters", str(w.adp_balance_iters)]
        if w.recv_interval > 1:
            args += ["--scheduler-recv-interval", str(w.recv_interval)]
        if w.batch_wait_iters or w.batch_wait_ratio:
            args += ["--batch-wait-iters", str(w.batch_wait_iters),
                     "--batch-wait-ratio", f"{w.batch_wait_ratio:g}"]  # fmt: skip
        if w.expert_load is not None and w.expert_load.run_id:
            args += ["--expert-load", w.expert_load.run_id]
            if w.expert_load.placement != "contiguous":
                args += ["--expert-placement", w.expert_load.placement]
        return args


def instance(lay: Layout, n: int, isl: int, osl: int, engine: str = "vllm",
             num_prompts: int = 0, token_budget: int = 0,
             expert_load: ExpertLoad | None = None, bench: str = "inferencex",
             range_ratio: float = -1.0, max_running: int = 0) -> Instance:  # fmt: skip
    """The serving instance a Tradeoff layout launches on an n-GPU host."""
    kind = lay.model_kind
    eng = lay.engine or engine
    w = Workload(isl, osl, eng, kv_dtype=lay.kv_dtype,
                 a2a_dtype=lay.dispatch_dtype or lay.combine_dtype,
                 activations=lay.activations, num_prompts=num_prompts,
                 token_budget=token_budget, expert_load=expert_load, bench=bench,
                 range_ratio=range_ratio, max_running=max_running)  # fmt: skip
    ar = lay.allreduce_op
    if kind == "tp_ep_dp1":
        return Instance(ServeLayout(lay.tp, moe_tp=1, moe_ep=lay.tp, allreduce=ar), 1, w)
    if kind == "tp_attn_ep_moe":
        serve = ServeLayout(lay.tp, moe_tp=1, moe_ep=lay.tp, a2a=lay.a2a_backend or
                            "deepep_low_latency", allreduce=ar)  # fmt: skip
        return Instance(serve, 1, w)
    if kind == "dp_attn_ep":
        return Instance(ServeLayout(1, dp=n, moe_tp=1, moe_ep=n, a2a=lay.a2a_backend), 1, w)
    if kind == "tp_dp":
        return Instance(ServeLayout(lay.tp, moe_tp=lay.tp, allreduce=ar), lay.dp, w)
    return Instance(ServeLayout(lay.tp, moe_tp=lay.tp, allreduce=ar), 1, w)  # tp, fast AR


def predict_instance(m: ModelSpec, inst: Instance, hw, conc: np.ndarray,
                     p: ServingParams = FITTED,
                     comm: CommSet | None = None) -> Prediction:  # fmt: skip
    """The prediction at the client's concurrency: each of R replicas serves ceil(C / R);
    the throughput is all replicas'."""
    c = np.asarray(conc, dtype=float)
    per = np.ceil(c / inst.replicas)
    w = inst.workload
    if w.num_prompts and inst.replicas > 1:
        w = Workload(**{**w.__dict__, "num_prompts": math.ceil(w.num_prompts / inst.replicas)})
    pr = predict(m, hw, inst.serve, w, per, p, comm)
    pr.concurrency = c
    pr.output_tok_s = pr.output_tok_s * np.minimum(inst.replicas, c)
    return pr
