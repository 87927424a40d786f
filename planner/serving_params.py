"""Named parameters of the serving cost model (planner.serving): fitted ones and fixed ones.

Fitted (six numbers, one set for every GPU; bw_eff ends at its 0.92 bound): on the vLLM rows of
``../shared/fixtures/serving/aic_silicon_blackwell_agg.csv`` (filtered by
``planner.fixture``) with

    python -m planner.fit                   # prints the values pasted below
    python -m planner.fit --engine sglang   # the per-engine step overhead of SGLang / TRT-LLM

Hardware enters only through spec-sheet numbers (planner.hardware); nothing here is per host.
A test (tests/planner/test_serving_fit.py) refits and fails when these drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Weight formats as the kernels see them. Fractions of the dense (BF16/FP8) bandwidth
# efficiency a format's decode GEMM reaches, by GPU generation (fixed, not fitted):
# - W4A16 Marlin: ~3.9x of the ideal 4x over FP16 up to batch 16-32 (Frantar et al., "MARLIN:
#   Mixed-Precision Auto-Regressive Parallel Inference", 2024, fig. 1) -> 0.95 of BF16.
# - NVFP4 / MXFP4 on Blackwell: native block-scaled tensor cores (CUTLASS / FlashInfer / TRT-LLM
#   kernels), same streaming efficiency as FP8 -> 1.0.
# - NVFP4 / MXFP4 where no FP4 tensor cores exist (Hopper, Ampere, Ada): vLLM runs them as
#   W4A16 through the Marlin FP4 kernel (dequantize to BF16) -> 0.9, BF16 compute.
# - FP8 block on Ampere: no FP8 tensor cores; vLLM's FP8 Marlin (W8A16) -> 0.95, BF16 compute.
FORMAT_BW: dict[tuple[str, bool], float] = {
    ("bf16", True): 1.0, ("bf16", False): 1.0,
    ("fp8", True): 1.0, ("fp8", False): 0.95,
    ("int4", True): 0.95, ("int4", False): 0.95,
    ("fp4", True): 1.0, ("fp4", False): 0.9,
}  # fmt: skip

# Kernels per layer on the decode path with CUDA graphs (vLLM v1 / SGLang, fused norms and
# activations): RMSNorm x2, QKV GEMM, RoPE + cache write, attention, O GEMM, gate_up GEMM,
# activation, down GEMM. MoE adds router GEMM, top-k, token permute, second grouped GEMM
# and unpermute/reduce; MLA adds q_a / kv_a / q_b GEMMs and the absorbed BMMs.
KERNELS = {"attention_gqa": 6, "attention_mla": 10, "dense_mlp": 4, "moe": 6}
EAGER_LAUNCH_US = 5.0  # CPU launch cost per kernel without CUDA graphs (--enforce-eager)


@dataclass(frozen=True)
class ServingParams:
    """The few global numbers of the serving model."""

    bw_eff: float = 0.80  # achieved fraction of spec memory bandwidth, dense GEMM / KV reads
    moe_eff: float = 0.70  # grouped expert GEMM bandwidth relative to dense
    kernel_us: float = 4.0  # per-kernel floor with CUDA graphs (us)
    expert_us: float = 0.5  # grouped GEMM overhead per expert the busiest rank runs (us)
    mfu: float = 0.45  # achieved fraction of dense tensor peak (prefill, compute-bound GEMMs)
    step_ms: dict[str, float] = field(
        default_factory=lambda: {"vllm": 1.0, "sglang": 1.0, "trtllm": 1.0}
    )  # engine's per-step overhead: scheduler, input prep, sampler, detokenize hand-off
    memory_utilization: float = 0.9  # vLLM --gpu-memory-utilization default
    reserve_gb: float = 4.0  # activations, CUDA graphs, NCCL buffers per GPU
    link_eff: float = 0.7  # achieved fraction of the spec link bandwidth (large messages)
    comm_scale: float = 1.0  # calibrated mode: measured / modelled collectives on this host
    burst_share: float = 0.3  # share of a wave's other prefills a new prompt waits behind
    ttft_fixed_ms: float = 30.0  # request path outside the GPU: HTTP, tokenize, first chunk

    def with_values(self, **kw: float) -> ServingParams:
        vals = {**self.__dict__, **{k: v for k, v in kw.items() if k != "step_ms"}}
        if "step_ms" in kw:
            vals["step_ms"] = kw["step_ms"]
        return ServingParams(**vals)


# Names, units and sources of every parameter, for the assumptions list.
DESCRIBE: dict[str, tuple[str, str]] = {
    "bw_eff": ("fraction of spec HBM/GDDR bandwidth streamed by dense GEMMs and KV reads",
               "fitted"),
    "moe_eff": ("grouped expert GEMM bandwidth relative to dense", "fitted"),
    "kernel_us": ("per-kernel floor under CUDA graphs, us", "fitted"),
    "expert_us": ("grouped-GEMM overhead per active expert per MoE layer, us", "fitted"),
    "mfu": ("fraction of dense tensor peak reached by prefill GEMMs", "fitted"),
    "step_ms": ("engine per-step overhead, ms", "fitted per engine"),
    "memory_utilization": ("GPU memory the engine may use", "vLLM default 0.9"),
    "reserve_gb": ("activation / CUDA-graph / NCCL reserve per GPU, GB", "assumed"),
    "link_eff": ("achieved fraction of spec NVLink / PCIe bandwidth", "assumed"),
    "burst_share": ("share of a wave's other prefills a new prompt waits behind", "fitted"),
    "ttft_fixed_ms": ("request path outside the GPU (HTTP, tokenize, stream), ms", "fitted"),
}  # fmt: skip

# ---- fitted values: `python -m planner.fit` (vLLM rows), `--engine sglang|trtllm` --------
FITTED = ServingParams(
    bw_eff=0.92,  # at its bound: no GPU streams more than ~92% of spec (0.92 in fit.BOUNDS)
    moe_eff=1.0,  # not fitted: expert_us carries the grouped GEMM's extra cost
    kernel_us=5.8636,
    expert_us=0.2444,
    mfu=0.3600,
    ttft_fixed_ms=65.57,
    burst_share=0.3219,
    # vLLM: 0 by construction (async scheduling, see fit.FREE); SGLang / TRT-LLM: fitted on
    # their own rows with everything else as above (both come out at 0).
    step_ms={"vllm": 0.0, "sglang": 0.0, "trtllm": 0.0},
)

# Leave-one-model-out error of TPOT on the fixture's vLLM rows (predicted / measured - 1),
# `benchmarks/planner_accuracy.py`: the band the pages draw around every prediction
# (measured is expected within predicted / (1 + q90) .. predicted / (1 + q10) in 80% of cases).
ACCURACY = {"median_abs": 0.1346, "within_25pct": 0.8159, "q10": -0.2284, "q90": 0.2587,
            "rows": 592, "source": "leave-one-model-out, vLLM rows of the Blackwell fixture"}  # fmt: skip
