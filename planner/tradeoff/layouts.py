"""Parallel layouts of one host's GPUs, with what each one uses in precision.

Kinds (the ``--json`` contract): tp, tp_ep_dp1, tp_attn_ep_moe, dp_attn_ep, tp_dp,
tp_fast_allreduce, downcast. A downcast layout is a base layout with one lossy change
(FP8 dispatch/combine, FP8 KV cache, W4A8 Marlin); the policy blocks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerInputError
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec
from planner.specs.precision import Precision

KINDS = ("tp", "tp_ep_dp1", "tp_attn_ep_moe", "dp_attn_ep", "tp_dp", "tp_fast_allreduce",
         "downcast")  # fmt: skip
EP_KINDS = ("tp_ep_dp1", "tp_attn_ep_moe", "dp_attn_ep")


# Only PCIe-only hosts have a faster AllReduce than TP's default to offer: with full NVLink,
# vLLM's TP already runs its custom AllReduce (vllm-project/vllm,
# vllm/distributed/device_communicators/custom_all_reduce.py: disabled only "on more than two
# PCIe-only GPUs"), which the NVLink latency class and the fit already carry.
NVLINK_RUNS_CUSTOM_ALLREDUCE = "with full NVLink, vLLM's TP already runs its custom AllReduce"


def offers_fast_allreduce(hw: HardwareSpec) -> bool:
    return hw.interconnect == "pcie"


@dataclass(frozen=True)
class Layout:
    name: str
    kind: str
    tp: int
    dp: int
    ep: int
    base: str = ""  # the cost-model kind (= kind, except for downcast variants)
    a2a_backend: str = ""  # allgather_reducescatter | deepep_low_latency (EP kinds)
    allreduce_op: str = "all_reduce"
    kv_dtype: str = ""  # "" = native
    dispatch_dtype: str = ""
    combine_dtype: str = ""
    activations: str = ""
    how: str = ""  # how to launch it / which engine implements it
    engine: str = ""  # "" = the plan's engine; "sglang" where only SGLang launches it

    @property
    def model_kind(self) -> str:
        return self.base or self.kind

    @property
    def uses_ep(self) -> bool:
        return self.model_kind in EP_KINDS

    def precision(self, model: ModelSpec) -> Precision:
        """What this layout uses; fields it does not touch equal the checkpoint's native."""
        n = model.native
        return Precision(
            weights=n.weights,
            activations=self.activations or n.activations,
            kv_cache=self.kv_dtype or n.kv_cache,
            communication=self.combine_dtype or n.communication,
            dispatch=self.dispatch_dtype or n.dispatch or n.communication,
        )

    def dispatch(self, model: ModelSpec) -> str:
        return self.precision(model).get("dispatch")

    def combine(self, model: ModelSpec) -> str:
        return self.precision(model).communication


def default_layouts(model: ModelSpec, hw: HardwareSpec) -> list[Layout]:
    """Every layout the calculator compares on this host, compliant and downcast."""
    n = hw.gpu_count
    if n < 1:
        raise PlannerInputError(f"host {hw.name!r}: no GPUs")
    out = [Layout(f"TP={n}", "tp", n, 1, 1, how=f"vllm serve MODEL -tp {n}")]
    moe = model.num_experts > 0 and n > 1
    if moe:
        out += [
            Layout(f"TP={n} + EP (DP=1)", "tp_ep_dp1", n, 1, n,
                   how=f"vllm serve MODEL -tp {n} --enable-expert-parallel (DP=1: all-to-all "
                   "never runs, the MoE output is still all-reduced)"),
            Layout("TP attention + EP MoE (write-up estimate)", "tp_attn_ep_moe", n, 1, n,
                   a2a_backend="deepep_low_latency", engine="sglang",
                   how="SGLang with DeepEP (--moe-a2a-backend deepep, BF16 dispatcher output); "
                   "vLLM has no such layout at DP=1"),
            Layout(f"DP={n} attention + EP={n} (AllGather+ReduceScatter)", "dp_attn_ep", 1, n,
                   n, a2a_backend="allgather_reducescatter",
                   how=f"vllm serve MODEL -tp 1 -dp {n} --enable-expert-parallel"),
            Layout(f"DP={n} attention + EP={n} (DeepEP low-latency)", "dp_attn_ep", 1, n, n,
                   a2a_backend="deepep_low_latency",
                   how=f"vllm serve MODEL -tp 1 -dp {n} --enable-expert-parallel "
                   "--all2all-backend deepep_low_latency"),
        ]  # fmt: skip
    for k in range(2, n):
        if n % k == 0:
            out.append(Layout(f"TP={k} x DP={n // k}", "tp_dp", k, n // k, 1,
                              how=f"{n // k} independent vllm serve -tp {k} replicas"))  # fmt: skip
    if n > 1 and offers_fast_allreduce(hw):
        out.append(Layout(
            f"TP={n} + FlashInfer PCIe-IPC AllReduce", "tp_fast_allreduce", n, 1, 1,
            allreduce_op="all_reduce_fast",
            how=f"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1 vllm serve MODEL -tp {n}",
        ))  # fmt: skip
    out += _downcasts(model, n, moe)
    return out


def _downcasts(model: ModelSpec, n: int, moe: bool) -> list[Layout]:
    out = []
    if not model.native.kv_cache.startswith("fp8"):
        out.append(Layout(f"TP={n} + FP8 KV cache", "downcast", n, 1, 1, base="tp",
                          kv_dtype="fp8_e4m3", how=f"vllm serve MODEL -tp {n} "
                          "--kv-cache-dtype fp8"))  # fmt: skip
    if moe and n > 1:
        out.append(Layout(
            "TP attention + EP MoE, FP8 dispatch/combine", "downcast", n, 1, n,
            base="tp_attn_ep_moe", a2a_backend="deepep_low_latency", engine="sglang",
            dispatch_dtype="fp8_e4m3", combine_dtype="fp8_e4m3",
            how="SGLang DeepEP default FP8 dispatch + VLLM_FLASHINFER_MOE_A2A_LOW_PRECISION_COMBINE=1",
        ))  # fmt: skip
        out.append(Layout(
            f"DP={n} attention + EP={n} (DeepEP LL, FP8 dispatch/combine)", "downcast", 1, n, n,
            base="dp_attn_ep", a2a_backend="deepep_low_latency", dispatch_dtype="fp8_e4m3",
            combine_dtype="fp8_e4m3", how="FP8 dispatch and FP8 combine payloads",
        ))  # fmt: skip
    if model.native.weights == "int4" and model.native.activations in ("bf16", "fp16"):
        out.append(Layout(f"TP={n} + W4A8 Marlin", "downcast", n, 1, 1, base="tp",
                          activations="fp8_e4m3",
                          how="VLLM_MARLIN_INPUT_DTYPE=fp8 (W4A16 -> W4A8)"))  # fmt: skip
    return out


def select(layouts: list[Layout], wanted: list[str] | None) -> list[Layout]:
    """Layouts by name or kind; unknown ones are a one-line error."""
    if not wanted:
        return layouts
    out: list[Layout] = []
    for w in wanted:
        hits = [lay for lay in layouts if w in (lay.name, lay.kind)]
        if not hits and w == "tp_fast_allreduce":
            raise PlannerInputError("layout 'tp_fast_allreduce' is for PCIe-only hosts of 2+ "
                                    f"GPUs: {NVLINK_RUNS_CUSTOM_ALLREDUCE}")  # fmt: skip
        if not hits:
            names = "; ".join(lay.name for lay in layouts)
            raise PlannerInputError(f"layout {w!r} unknown on this host (kinds: "
                                    f"{', '.join(KINDS)}; names: {names})")  # fmt: skip
        out += [h for h in hits if h not in out]
    return out
