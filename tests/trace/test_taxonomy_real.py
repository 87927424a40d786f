"""Taxonomy rules of issue 12, each checked on a kernel name as real traces spell it.

Sources (looked up with the code search, cited per name):
- FlashAttention-2 ``csrc/flash_attn/src/flash_fwd_launch_template.h``:
  ``DEFINE_FLASH_FORWARD_KERNEL(flash_fwd_splitkv_combine_kernel, ...)`` (namespace flash);
  PyTorch vendors it as ``pytorch_flash::`` (aten/src/ATen/native/transformers/cuda/flash_attn).
- FlashMLA ``csrc/smxx/decode/combine/combine.cu``: ``namespace smxx::decode`` ...
  ``flash_fwd_mla_combine_kernel``; a profile row spells it
  ``void smxx::decode::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, (int)512, ...>``.
- DeepEP ``csrc/kernels/intranode.cu`` / ``internode.cu`` / ``internode_ll.cu``: kernels
  ``notify_dispatch``, ``cached_notify_dispatch``, ``cached_notify_combine``,
  ``cached_notify``, ``dispatch``, ``combine``, ``get_dispatch_layout`` in namespaces
  ``deep_ep::{intranode,internode,internode_ll}``.
- Inductor RMSNorm: ``triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0`` (torch.compile of
  an RMSNorm, the kernel vLLM's default compiled path runs; seen in many vLLM profiles).
- CUTLASS 3.x grouped GEMM (examples/57_hopper_grouped_gemm):
  ``using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int,int,int>>`` with
  ``KernelPtrArrayTmaWarpSpecializedCooperative`` schedules.
- TRT-LLM / FlashInfer fused MoE: ``moe::dev::routing::routingCustom``,
  ``moe::dev::finalize::finalizeKernel`` (tensorrt_llm/kernels/trtllmGenKernels/blockScaleMoe),
  expert GEMMs ``bmm_Bfloat16_E2m1E2m1_Fp32_...`` (flashinfer cubins), block-scale quantize
  ``tensorrt_llm::kernels::quantize_with_block_size``; SGLang/vLLM
  ``per_token_group_quant_8bit_kernel``.
- PyTorch ``aten/src/ATen/native/cuda/TensorTopK.cu``: ``sbtopk::gatherTopK`` (torch.topk,
  which vLLM's sampler calls for top-k).
"""

from __future__ import annotations

import pytest

from collectors.profile.workload import OP_CATEGORIES
from collectors.trace import taxonomy

REAL = [
    # attention combine kernels are attention, not all-to-all
    ("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<(int)128, (int)64, "
     "(int)128, (int)4, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, "
     "(int)64, (int)128, (int)4, cutlass::bfloat16_t>>, (int)4, (int)3, (bool)1>(Flash_fwd_params)",
     "attention"),
    ("void pytorch_flash::flash_fwd_splitkv_combine_kernel<pytorch_flash::Flash_fwd_kernel_traits"
     "<64, 64, 128, 4, false, false, cutlass::bfloat16_t>, 4, 1, true>(pytorch_flash::"
     "Flash_fwd_params)", "attention"),
    ("void smxx::decode::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, (int)512, (int)8, "
     "(int)160, (int)256>(CombineParams)", "attention"),
    # DeepEP, upstream and under another namespace
    ("void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, ...)", "all_to_all"),
    ("void xyz::ep::internode::dispatch<false, 8, 7168, 1>(int4*, float*, ...)", "all_to_all"),
    ("void acme::ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*, ...)", "all_to_all"),
    ("void acme::ep::internode_ll::combine<false, 7168, 9>(void*, ...)", "all_to_all"),
    ("void acme::ep::intranode::notify_dispatch<8>(int const*, int*, ...)", "all_to_all"),
    ("void notify_dispatch<8>(int const*, int*, int, int const*, int*, int, int, int)",
     "all_to_all"),
    ("void cached_notify_combine<8>(void**, int*, int, int, int**, int)", "all_to_all"),
    ("void cached_notify<false>(int, int, int, int, int*, int*, int*, int*, int, int, int)",
     "all_to_all"),
    ("void get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, "
     "int, int)", "all_to_all"),
    # Inductor fused RMSNorm / LayerNorm
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_3", "norm"),
    ("triton_red_fused__to_copy_add_native_layer_norm_1", "norm"),
    ("triton_poi_fused__to_copy_1", "cast_quant"),  # a plain fused cast stays a cast
    # grouped expert GEMMs and TRT-LLM MoE kernels without "moe" in the GEMM name
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
     "GroupProblemShape<cute::tuple<int, int, int> >, cutlass::gemm::collective::"
     "CollectiveMma<...KernelPtrArrayTmaWarpSpecializedCooperative...> > >(...)", "moe"),
    ("void moe::dev::routing::routingCustom::routingIndicesBlockKernel<...>(...)", "moe"),
    ("void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<...>>(...)",
     "moe"),
    # by name alone a TRT-LLM-gen bmm is a GEMM (also used for dense FP4 GEMMs); inside a
    # fused-MoE op it becomes moe (test_graph_mode / enclosing op tests)
    ("bmm_Bfloat16_E2m1E2m1_Fp32_Ab16_Bb16_t128x128x256u2_s6_et128x128_m256x128x64_c2x1x1_rM_TN_"
     "transOut_schPd2x1x2x3_biasFp32M_bN_rgTma_clmp_dynB_sm100f", "gemm"),
    # block-scale quantize kernels
    ("void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::"
     "BlockScaleQuantizationType)1, __nv_bfloat16, 16, false>(int, int, int, int, ...)",
     "cast_quant"),
    ("void per_token_group_quant_8bit_kernel<__nv_bfloat16, c10::Float8_e4m3fn, false>(...)",
     "cast_quant"),
    ("void cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, __nv_bfloat16 const*, ...)",
     "cast_quant"),
    # sampler top-k
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::"
     "TensorInfo<float const, unsigned int>, ...)", "sampling"),
    ("void at::native::mbtopk::gatherTopK<float, unsigned int, 2>(...)", "sampling"),
    # MoE routing top-k keeps its own category
    ("void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, 32, int>(...)", "moe"),
]


@pytest.mark.parametrize(("name", "category"), REAL)
def test_real_kernel_names(name, category):
    assert taxonomy.kernel_category(name) == category


@pytest.mark.parametrize(("op", "category"), [
    ("stepscope::gqa_attention", "attention"),
    ("stepscope::mla_attention", "attention"),
    ("stepscope::moe", "moe"),
    ("flashinfer::trtllm_fp4_block_scale_moe", "moe"),
    ("vllm::moe_forward", "moe"),
])  # fmt: skip
def test_enclosing_ops_cover_the_profile_workload_and_fused_moe(op, category):
    assert taxonomy.enclosing_op_category(op) == category


def test_every_profile_op_that_encloses_kernels_is_known():
    """The profile workload's attention and MoE ops (collectors/profile/workload.py) give
    their kernels their category on GPUs."""
    for op, category in OP_CATEGORIES.items():
        if category in ("attention", "moe"):
            assert taxonomy.enclosing_op_category(op) == category, op
