"""Kernel names seen in the wild (NVIDIA and ROCm) -> one category each."""

from __future__ import annotations

import pytest

from collectors.trace import taxonomy

NAMES = [
    # NCCL, new and old naming; RCCL uses the same names
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "allreduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "reduce_scatter"),
    (
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "other_comm",
    ),  # fmt: skip
    (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "other_comm",
    ),  # fmt: skip
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "other_comm"),
    # non-NCCL collectives
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, ...)",
        "allreduce",
    ),  # fmt: skip
    ("void vllm::cross_device_reduce_2stage<half, 4>(...)", "allreduce"),
    (
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<__nv_bfloat16, 16, 8>(...)",
        "allreduce",
    ),  # fmt: skip
    (
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<...>",
        "allreduce",
    ),  # fmt: skip
    ("void quickreduce::allreduce_prototype_twoshot<quickreduce::CodecFP, 8>(...)", "allreduce"),
    ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, ...)", "all_to_all"),
    ("void deep_ep::internode_ll::combine<true, 7168, 9>(void*, ...)", "all_to_all"),
    ("void pplx::dispatchKernel<__nv_bfloat16>(...)", "all_to_all"),
    # MoE: fused MoE, Marlin MoE, routing, top-k, triton_kernels
    ("fused_moe_kernel", "moe"),
    ("void marlin_moe_wna16::Marlin<__nv_bfloat16, 4, 256, 1, 8, 8, false>(...)", "moe"),
    ("void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, 32, int>(...)", "moe"),
    ("void vllm::moe::moe_align_block_size_kernel<int>(...)", "moe"),
    ("_topk_forward", "moe"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "moe"),
    # GEMM: cuBLAS/nvjet/CUTLASS/Marlin dense, ROCm hipBLASLt/Tensile and skinny GEMM
    ("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", "gemm"),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute",
        "gemm",
    ),  # fmt: skip
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>(...)", "gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("void marlin::Marlin<__nv_bfloat16, 4, 256, 1, 8, 8, true, false, 8>(...)", "gemm"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256_MI16x16x1_SN_LDSB1", "gemm"),
    ("void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>(...)", "gemm"),
    ("volta_sgemm_64x64_nt", "gemm"),
    # attention: flash, FMHA, MLA, FlashInfer, paged/unified attention, KV-cache writes
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, ...>",
        "attention",
    ),  # fmt: skip
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>", "attention"),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<...>", "attention"),
    ("void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64>>", "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
    ("void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, ...>", "attention"),
    ("kernel_unified_attention_2d", "attention"),
    (
        "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16>(...)",
        "attention",
    ),  # fmt: skip
    # norms (ROCm aiter and CK included), casts/quant, sampling, memory, elementwise
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, ...)", "norm"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_", "norm"),
    ("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePass", "norm"),
    ("void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(...)", "norm"),
    ("void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(...)", "norm"),
    ("void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(...)", "cast_quant"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda"
        "(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(...)",
        "cast_quant",
    ),  # fmt: skip
    (
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)"
        "::{lambda(float)#1}, ..., at::native::memory::LoadWithCast<1>, "
        "at::native::memory::StoreWithCast<1> >(...)",
        "cast_quant",
    ),  # fmt: skip
    ("triton_poi_fused__to_copy_1", "cast_quant"),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, ...>", "sampling"),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
        "at::native::ArgMaxOps<float>, unsigned int, long, 4> >(...)",
        "sampling",
    ),  # fmt: skip
    ("Memcpy DtoD (Device -> Device)", "memory"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<...>", "memory"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, ...>",
        "memory",
    ),  # fmt: skip
    ("__amd_rocclr_copyBuffer", "memory"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)"
        "::silu_kernel(...)",
        "elementwise",
    ),  # fmt: skip
    ("triton_poi_fused_add_mul_0", "elementwise"),
    ("void cub::DeviceRadixSortOnesweepKernel<...>", "other"),
]


@pytest.mark.parametrize(("name", "category"), NAMES)
def test_kernel_category(name, category):
    assert taxonomy.kernel_category(name) == category


def test_every_category_is_reachable_and_table_has_known_categories():
    assert {c for c, _ in taxonomy.KERNEL_PATTERNS} <= set(taxonomy.CATEGORIES)
    assert {c for c, _ in taxonomy.CPU_OP_PATTERNS} <= set(taxonomy.CATEGORIES)
    assert {c for _, c in NAMES} == set(taxonomy.CATEGORIES)


@pytest.mark.parametrize(("name", "arg", "dtype"), [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", None, "bf16"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", None, "f32"),
    ("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL", None, "f8e4m3"),
    ("ncclDevKernel_AllGather_Sum_f8e5m2_RING_LL", None, "f8e5m2"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", None, "i8"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "BFloat16", "bf16"),  # the arg wins
    ("ncclDevKernel_AllReduce_Sum_f16_RING_LL", None, "f16"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", None, "bf16"),
    ("ncclDevKernel_AllGather_RING_LL", "Float8_e4m3fn", "f8e4m3"),
    ("ncclDevKernel_AllGather_RING_LL", None, None),
])  # fmt: skip
def test_collective_dtype(name, arg, dtype):
    assert taxonomy.collective_dtype(name, arg) == dtype


@pytest.mark.parametrize(("label", "category"), [
    ("nccl:all_to_all", "all_to_all"), ("alltoall_base_", "all_to_all"),
    ("nccl:all_reduce", "allreduce"), ("nccl:_all_gather_base", "allgather"),
    ("all_gather_into_tensor", "allgather"), ("nccl:reduce_scatter", "reduce_scatter"),
    ("nccl:broadcast", "other_comm"), ("nccl:send", "other_comm"), ("nonsense", None),
])  # fmt: skip
def test_collective_names(label, category):
    assert taxonomy.collective_category(label) == category


@pytest.mark.parametrize(("op", "category"), [
    ("aten::linear", "gemm"), ("aten::addmm", "gemm"), ("aten::layer_norm", "norm"),
    ("aten::scaled_dot_product_attention", "attention"), ("aten::topk", "moe"),
    ("c10d::allreduce_", "allreduce"), ("c10d::alltoall_base_", "all_to_all"),
    ("c10d::broadcast_", "other_comm"), ("aten::_to_copy", "cast_quant"),
    ("aten::copy_", "memory"), ("aten::silu", "elementwise"), ("aten::multinomial", "sampling"),
    ("my_custom_op", "other"),
])  # fmt: skip
def test_cpu_op_category(op, category):
    assert taxonomy.cpu_op_category(op) == category


def test_lowercased_patterns_keep_their_escapes():
    pattern = r"\bGEMM\w*|Cijk_\d+|\WMarlinMoE"
    assert taxonomy._lowercase_pattern(pattern) == r"\bgemm\w*|cijk_\d+|\Wmarlinmoe"


def test_every_real_kernel_and_op_name_gets_the_ignorecase_category():
    # The lowercased patterns are a speed-up only: every name of every fixture trace, and
    # the real names the taxonomy tests use, must land where an IGNORECASE search puts them.
    import re
    from pathlib import Path

    from collectors.trace.readers.kineto import read_trace
    from tests.trace.conftest import TRACES
    from tests.trace.test_taxonomy_real import REAL

    names = {row[0] for row in REAL}
    paths = sorted(Path(TRACES).glob("*/*.json.gz"))
    for path in paths:
        names |= set(read_trace(path, all_cpu_ops=True).names)
    assert len(names) > (500 if paths else 10)

    def by_ignorecase(patterns: tuple[tuple[str, str], ...], name: str) -> str:
        for cat, pattern in patterns:
            if re.search(pattern, name, re.IGNORECASE):
                return cat
        return "other"

    for name in names:
        assert taxonomy.kernel_category(name) == by_ignorecase(taxonomy.KERNEL_PATTERNS, name)
        assert taxonomy.cpu_op_category(name) == by_ignorecase(taxonomy.CPU_OP_PATTERNS, name)
