"""Named parameters of the serving cost model (planner.cost.serving): fitted ones and fixed ones.

Fitted in fitting/ (outside the product: nothing here reads the fit's data), one set for
every GPU, on every engine's rows: what belongs to the GPU (achieved bandwidth, per-kernel
floor and each engine's kernels' floor relative to it, grouped-GEMM overhead per expert,
prefill tensor efficiencies, each engine's per-sequence cost per step) and what lies outside
it (each engine's request path in TTFT). Scheduling (token
budgets, chunking, admission, KV memory rules, the benchmark's waves) is not fitted:
planner.sched simulates it, from the engines' source (planner/specs/engines.py for defaults).

    python -m fitting --bands --write   # refits FITTED and BANDS into planner/cost/fitted.json

Hardware enters only through spec-sheet numbers (planner.specs.hardware); nothing here is per host.
A test (tests/fitting/test_serving_fit.py) refits and fails when these drift.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

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
# FP4 MoE on GPUs with FP4 tensor cores runs FlashInfer's fused CUTLASS / TRT-LLM-gen MoE
# (vllm-project/vllm, vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py:
# ``is_flashinfer_fp4_cutlass_moe_available`` = VLLM_USE_FLASHINFER_MOE_FP4 and capability
# >= 10.0): routing, permute, both grouped GEMMs and the finalize in about 3 launches.
# A sparse-attention (DSA: DeepSeek-V3.2, GLM-5) layer adds its indexer's decode path: wq_b and
# wk GEMMs, k LayerNorm, RoPE, two RoPE copies, two Hadamard rotations and two FP8 quants on
# the critical stream (weights_proj beside them), the head-gate scale, the index-key cache
# store, fp8_paged_mqa_logits and the top-k (sgl-project/sglang,
# python/sglang/srt/layers/attention/nsa/nsa_indexer.py ``Indexer.forward_cuda``).
KERNELS = {"attention_gqa": 6, "attention_mla": 10, "dsa_indexer": 14, "dense_mlp": 4, "moe": 6,
           "moe_fused": 3}  # fmt: skip
EAGER_LAUNCH_US = 5.0  # CPU launch cost per kernel without CUDA graphs (--enforce-eager)


@dataclass(frozen=True)
class ServingParams:
    """The few global numbers of the serving model."""

    bw_eff: float = 0.80  # achieved fraction of spec memory bandwidth, dense GEMM / KV reads
    moe_eff: float = 1.0  # grouped expert GEMM bandwidth relative to dense (expert_us carries it)
    kernel_us: float = 4.0  # per-kernel floor with CUDA graphs (us)
    expert_us: float = 0.5  # grouped GEMM overhead per expert the busiest rank runs (us)
    # per decoding sequence per layer per step, per engine: each row's attention blocks (us)
    seq_us: dict[str, float] = field(
        default_factory=lambda: {"vllm": 0.3, "sglang": 0.3, "trtllm": 0.3})
    mfu: float = 0.45  # achieved fraction of dense tensor peak (prefill, compute-bound GEMMs)
    moe_mfu: float = 0.3  # the same for prefill's grouped expert GEMMs (routing, permute, tiles)
    memory_utilization: float = 0.9  # vLLM --gpu-memory-utilization default
    reserve_gb: float = 4.0  # activations, CUDA graphs, NCCL buffers per GPU
    link_eff: float = 0.7  # achieved fraction of the spec link bandwidth (large messages)
    # Request path outside the GPU per engine: HTTP, tokenise, detokenise the first token.
    ttft_fixed_ms: dict[str, float] = field(
        default_factory=lambda: {"vllm": 30.0, "sglang": 30.0, "trtllm": 30.0})
    # Each engine's per-kernel floor relative to kernel_us (vLLM's): its kernels' fusion and
    # launch granularity on this GPU.
    engine_kernel: dict[str, float] = field(
        default_factory=lambda: {"vllm": 1.0, "sglang": 1.0, "trtllm": 1.0})
    # Calibrated mode (planner.cost.calibrate): measured / modelled on this host.
    compute_scale: float = 1.0
    allreduce_scale: float = 1.0
    a2a_scale: float = 1.0
    window: Window | None = None  # the concurrencies these values hold for (else all)

    def with_values(self, **kw) -> ServingParams:
        return replace(self, **kw)


@dataclass(frozen=True)
class Window:
    """The measured concurrencies of a calibration (``lowest``-``highest``): it holds there
    and fades away from them, weighted by how far one point's error carries along a sweep on
    the fixture (:meth:`weight`); ``outside`` predicts where nothing carries."""

    lowest: float
    highest: float
    outside: ServingParams

    def weight(self, conc) -> np.ndarray:
        """1 within the measured concurrencies; octaves away from them, ``CARRY_WEIGHT``
        (linear between whole octaves), 0 from ``CARRY_APART[-1]`` octaves on."""
        c = np.asarray(conc, dtype=float)
        octaves = np.maximum(np.log2(np.maximum(self.lowest / c, c / self.highest)), 0.0)
        return np.interp(octaves, CARRY_APART, CARRY_WEIGHT)


# Names, units and sources of every parameter, for the assumptions list.
DESCRIBE: dict[str, tuple[str, str]] = {
    "bw_eff": ("fraction of spec HBM/GDDR bandwidth streamed by dense GEMMs and KV reads",
               "fitted"),
    "kernel_us": ("per-kernel floor under CUDA graphs, us", "fitted"),
    "expert_us": ("grouped-GEMM overhead per active expert per MoE layer, us", "fitted"),
    "seq_us": ("per decoding sequence per layer per step (its attention blocks), us",
               "fitted per engine"),
    "mfu": ("fraction of dense tensor peak reached by prefill GEMMs", "fitted"),
    "ttft_fixed_ms": ("request path outside the GPU (HTTP, tokenize, stream), ms",
                      "fitted per engine"),
    "engine_kernel": ("the engine's per-kernel floor relative to vLLM's", "fitted per engine"),
    "memory_utilization": ("GPU memory the engine may use", "vLLM default 0.9"),
    "reserve_gb": ("activation / CUDA-graph / NCCL reserve per GPU, GB", "assumed"),
    "link_eff": ("achieved fraction of spec NVLink / PCIe bandwidth", "assumed"),
}  # fmt: skip

# ---- fitted values and error bands: planner/cost/fitted.json ---------------------------
# Written by ``python -m fitting --bands --write`` (the fit lives outside the product, in
# fitting/); BANDS: leave-one-model-out residuals (predicted / measured - 1) per engine /
# weight format, the band every page and the CLI draw (planner.cost.bands).
FITTED_FILE = Path(__file__).resolve().parent / "fitted.json"
_FITTED_DOC = json.loads(FITTED_FILE.read_text())
FITTED = ServingParams(**_FITTED_DOC["params"])
BANDS: dict[str, dict[str, dict[str, float]]] = _FITTED_DOC["bands"]
# Calibrated mode's spreads (planner.cost.calibrate, planner.cost.bands): how far one host's
# factors, one layout's level and one point stray, on the fixture; python -m fitting
# --calibration --write.
CALIBRATION: dict = _FITTED_DOC["calibration"]
# How far one measured point's error carries along a sweep (planner.cost.params.Window): weight 1
# at 0 octaves apart, the fixture's correlation at each whole octave whose correlation is
# significant, 0 at the first that is not (``carry_octaves`` + 0.5).
_CARRY_LAST = round(CALIBRATION["carry_octaves"] - 0.5)
CARRY_APART = [0.0, *range(1, _CARRY_LAST + 1), _CARRY_LAST + 1.0]
CARRY_WEIGHT = [1.0, *(CALIBRATION["carry_correlation"][str(d)]
                       for d in range(1, _CARRY_LAST + 1)), 0.0]  # fmt: skip
