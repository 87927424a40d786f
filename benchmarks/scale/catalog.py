"""What the scale store is made of: the run mix, host classes and decode-step kernel templates.

Pure data, no I/O. Kernel names are real ones (vLLM, NCCL, FlashMLA, Marlin MoE, DeepEP);
their categories come from the trace collector's own taxonomy, so the generated rows look
exactly like what ``python -m collectors trace`` stores for a MoE decode step.
"""

from __future__ import annotations

from dataclasses import dataclass

# Verbs and their share of 100 runs. The first eleven slots hold one of each, so even a tiny
# store (the smoke test) has every kind of run; the rest keep the proportions.
VERB_SHARES: tuple[tuple[str, int], ...] = (
    ("trace", 20), ("profile", 10), ("vllm-profile", 4), ("vllm-metrics", 23), ("host", 10),
    ("gpu", 10), ("comm", 8), ("nccl-tests", 4), ("vllm-bench", 8), ("sglang-profile", 2),
    ("expert-load", 1),
)  # fmt: skip
KERNEL_VERBS = ("trace", "profile", "vllm-profile", "sglang-profile")  # runs with trace tables


def verb_cycle() -> list[str]:
    """100 verb slots: one of each first, then the rest interleaved by share."""
    left = {verb: share - 1 for verb, share in VERB_SHARES}
    cycle = [verb for verb, _ in VERB_SHARES]
    while any(left.values()):
        for verb, _ in VERB_SHARES:
            if left[verb]:
                cycle.append(verb)
                left[verb] -= 1
    assert len(cycle) == 100
    return cycle


@dataclass(frozen=True)
class HostClass:
    gpu_model: str
    interconnect: str  # pcie-only | nvlink
    memory_bytes: int
    mem_bw_gbps: float
    nvlinks: int  # per GPU


HOST_CLASSES: tuple[HostClass, ...] = (
    HostClass("NVIDIA RTX PRO 6000 Blackwell Server Edition", "pcie-only", 97_887_027_200,
              1597.0, 0),
    HostClass("NVIDIA RTX PRO 6000 Blackwell Server Edition", "pcie-only", 97_887_027_200,
              1597.0, 0),
    HostClass("NVIDIA H200", "nvlink", 150_754_820_096, 4800.0, 18),
    HostClass("NVIDIA H100 80GB HBM3", "nvlink", 85_520_809_984, 3352.0, 18),
)  # fmt: skip
HOSTS = 16  # host-00 .. host-15; host class = index % 4

_NORM = ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
         "c10::BFloat16 const*, float, int, int)")  # fmt: skip
_ADD_NORM = ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, "
             "c10::BFloat16*, c10::BFloat16 const*, float, int, int)")  # fmt: skip
_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
_AR_FP8 = "ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
_CUSTOM_AR = ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
              "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)")  # fmt: skip
_QUANT = ("void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>("
          "c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, long)")  # fmt: skip
_DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)"
_COMBINE = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)"

# One transformer layer of a MoE decode step (MLA attention, Marlin W4A16 experts):
# (name, dtype, mean duration in us). 18 kernels; a step is a memcpy, N layers, a sampler.
# The GEMM and expert times sit above their physical floors on an H100 (planner/floors), so
# the Kernel page shows ratios, not an input error.
LAYER: tuple[tuple[str, str | None, float], ...] = (
    (_NORM, None, 4.0),
    ("nvjet_tst_128x64_64x6_1x1_v_bz_coopA_TNT", None, 12.0),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", None, 16.0),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
     "c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)", None, 3.0),
    ("void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, "
     "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, "
     "__nv_bfloat16*, long const*, int, int, int, int, int, int, float const*)", None, 3.0),
    ("void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, "
     "cutlass::bfloat16_t, 512>, true>(Flash_fwd_mla_params)", None, 22.0),
    ("nvjet_tst_64x32_64x16_2x1_v_bz_TNN", None, 13.0),
    (_AR, "bf16", 78.0),
    (_ADD_NORM, None, 4.0),
    ("nvjet_tst_64x8_64x16_4x1_v_bz_TNN", None, 7.0),
    ("void vllm::moe::topkGatingSoftmax<8, 384, 4, 16, int>(float const*, bool const*, "
     "float*, int, int*, int, int, int)", None, 4.0),
    ("void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, "
     "int, int, int, unsigned long, int*)", None, 3.0),
    ("void marlin_moe_wna16::Marlin<(vllm::ScalarTypeId)5, 256, 1, 8, 8, 4, true, 0, "
     "false>(int4 const*, int4 const*, int4*, int4*)", None, 110.0),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, "
     "true>(c10::BFloat16*, c10::BFloat16 const*, int)", None, 3.0),
    ("void marlin_moe_wna16::Marlin<(vllm::ScalarTypeId)5, 128, 1, 8, 8, 4, true, 0, "
     "false>(int4 const*, int4 const*, int4*, int4*)", None, 75.0),
    ("void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, "
     "int)", None, 3.0),
    (_AR, "bf16", 78.0),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::"
     "BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char*, 3ul>)", None, 2.0),
)  # fmt: skip
FIRST = ("Memcpy HtoD (Pageable -> Device)", None, 6.0, "memcpy")
LAST = ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024, (cub::"
        "BlockScanAlgorithm)0, (cub::BlockReduceAlgorithm)2, 1u, false, int>(float*, int*, "
        "int*, float*, int*, float*, unsigned int, unsigned long, unsigned long)", None, 25.0,
        "kernel")  # fmt: skip
GAP_US = 1.5  # launch gap between consecutive kernels

# Run variants (run index % 5): what the Policy page has to find among them.
VARIANTS = {
    0: {},  # TP, bf16 NCCL AllReduce: compliant
    1: {11: (_DISPATCH, "bf16", 19.0), 16: (_COMBINE, "bf16", 21.0)},  # expert parallel
    2: {7: (_AR_FP8, "f8e4m3", 52.0), 16: (_AR_FP8, "f8e4m3", 52.0)},  # FP8 AllReduce
    3: {6: (_QUANT, None, 3.0), 15: (_QUANT, None, 3.0)},  # quantize, then AllReduce: review
    4: {7: (_CUSTOM_AR, "bf16", 30.0), 16: (_CUSTOM_AR, "bf16", 30.0)},  # custom AllReduce
}


def template_rows() -> list[tuple]:
    """(variant, slot, name, category, dtype, kind, base_us, offset_us) for every variant.

    Slot -1 is the step's first event, -2 its last, 0..17 the layer kernels; offset_us is
    where the kernel starts inside its layer (or step, for -1/-2).
    """
    from collectors.trace.taxonomy import kernel_category

    rows = []
    for variant, changes in VARIANTS.items():
        offset = 0.0
        for slot, default in enumerate(LAYER):
            name, dtype, base = changes.get(slot, default)
            rows.append((variant, slot, name, kernel_category(name), dtype, "kernel", base, offset))
            offset += base + GAP_US
        rows.append((variant, -1, FIRST[0], "memory", None, FIRST[3], FIRST[2], 0.0))
        rows.append((variant, -2, LAST[0], kernel_category(LAST[0]), None, LAST[3], LAST[2], 0.0))
    return rows


def layer_us(variant: int) -> float:
    changes = VARIANTS[variant]
    return sum(changes.get(i, k)[2] + GAP_US for i, k in enumerate(LAYER))
