"""Kernel taxonomy: every GPU kernel (or top-level CPU op) gets exactly one category.

The patterns are data: ``KERNEL_PATTERNS`` is read top to bottom and the first match
wins, so specific families (communication, MoE, sampling) come before the generic ones
(GEMM, elementwise). Names are matched case-insensitively anywhere in the kernel name,
which covers NVIDIA, ROCm (hipBLASLt ``Cijk_``, CK, aiter, RCCL) and Triton spellings.
Things a kernel name cannot tell are resolved with context in ``categorize``: NCCL
``SendRecv``/``Generic`` kernels by the collective that launched them, and
``direct_copy_kernel_cuda`` (copy or cast) by the CPU op that launched it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from store.trace_vocab import CATEGORIES, COMM

__all__ = ["CATEGORIES", "COMM", "kernel_category", "cpu_op_category", "enclosing_op_category"]

# (category, regex): first match wins. One comment per family.
KERNEL_PATTERNS: tuple[tuple[str, str], ...] = (
    # NCCL/RCCL, old `ncclKernel_*` and new `ncclDevKernel_*` (+ RCCL `ncclDevFunc`):
    # the collective is in the name. SendRecv/Generic are resolved by context (below).
    ("allreduce", r"nccl\w*_all_?reduce"),
    ("allgather", r"nccl\w*_all_?gather"),
    ("reduce_scatter", r"nccl\w*_reduce_?scatter"),
    ("all_to_all", r"nccl\w*_all_?to_?all"),
    ("other_comm", r"nccl\w*_(sendrecv|send|recv|broadcast|reduce|generic)|nccl|rccl"),
    # vLLM custom AllReduce (also aiter's), torch symmetric memory, FlashInfer/TRT-LLM
    # AllReduce (one/two-shot, lamport), ROCm quick-reduce, SGLang custom AR.
    (
        "allreduce",
        r"cross_device_reduce|multimem_all_reduce|one_shot_all_reduce|"
        r"two_shot_all_reduce|allreduce_fusion|trtllm_?allreduce|lamport|"
        r"quick_?reduce|allreduce_prototype|custom_?all_?reduce|"
        r"(one|two)shot_?all_?reduce",
    ),  # fmt: skip
    ("allgather", r"multimem_all_gather|symm\w*all_gather|all_gather_kernel"),
    # Split-KV attention's combine step, before the generic `combine_kernel` rule below:
    # FlashAttention-2 `flash::flash_fwd_splitkv_combine_kernel`, PyTorch's copy
    # `pytorch_flash::flash_fwd_splitkv_combine_kernel`, FlashMLA
    # `smxx::decode::flash_fwd_mla_combine_kernel`.
    ("attention", r"flash_fwd_\w*combine|mla_combine|combine_attn"),
    ("reduce_scatter", r"symm\w*reduce_scatter|reduce_scatter_kernel"),
    # Expert-parallel all-to-all: DeepEP (intranode/internode/low-latency, also forks and
    # vendored copies under another namespace: `xyz::ep::internode::dispatch`, and its
    # un-namespaced helpers notify_dispatch / cached_notify* / get_dispatch_layout),
    # pplx-kernels, MoRI, FlashInfer/TRT-LLM MoE all-to-all, NVSHMEM-based a2a.
    (
        "all_to_all",
        r"deep_?ep|\bep::(?:intra|inter)node|notify_dispatch|cached_notify|"
        r"get_dispatch_layout|pplx|mori\w*(dispatch|combine)|moe_?a2a|all2all|alltoall|"
        r"all_to_all|moe_?(dispatch|combine)|(dispatch|combine)_kernel",
    ),  # fmt: skip
    ("other_comm", r"nvshmem|userbuffers|c10d|gloo"),
    # Sampling: FlashInfer sampling, vLLM/SGLang top-k/top-p, penalties, greedy argmax,
    # torch.topk's radix-select kernels (`at::native::sbtopk::gatherTopK`, mbtopk) which
    # the sampler runs (MoE routing uses its own fused top-k kernels).
    (
        "sampling",
        r"sampling|sampler|top_?k_?top_?p|top_?p_|min_?p_|multinomial|gatherTopK|"
        r"sbtopk|mbtopk|"
        r"penalt|gumbel|argmax|ArgMaxOps|exponential_",
    ),  # fmt: skip
    # MoE: fused MoE (Triton, CUTLASS, Marlin MoE, aiter/CK fmoe, DeepGEMM grouped,
    # triton_kernels matmul_ogs), routing (top-k softmax, grouped top-k, bitmatrix),
    # token permute/align/sort/sum around the experts. Grouped expert GEMMs whose names
    # lack "moe": CUTLASS 3.x grouped GEMM (`cutlass::gemm::GroupProblemShape`, ptr-array
    # kernels `KernelPtrArray*`), TRT-LLM's `moe::dev::{routing,finalize,...}` kernels.
    (
        "moe",
        r"moe|marlin_moe|MarlinMoE|fused_experts|grouped_gemm|m_grouped|matmul_ogs|"
        r"GroupProblemShape|PtrArray|"
        r"topk_?softmax|topkGating|grouped_topk|_topk_forward|topk|routing|router|"
        r"bitmatrix|expert|gating|_finalize_matmul_scatter",
    ),  # fmt: skip
    # Norms (before attention: FlashInfer's RMSNorm is `flashinfer::norm::...`): RMSNorm/
    # LayerNorm (vLLM, aiter, CK Rmsnorm2d, torch), batch/group norm
    # (incl. cuDNN bn_*); fused add+norm(+quant) counts as norm.
    (
        "norm",
        r"rms_?norm|layer_?norm|RowwiseMoments|batch_?norm|group_?norm|cudnn::bn_|"
        r"bn_fw|bn_bw|l2_?norm|normaliz|"
        # Inductor-fused RMSNorm (vLLM's default torch.compile path): the fused ops are
        # listed alphabetically, `triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0`;
        # fused LayerNorm is `..._native_layer_norm_..` or `..var_mean..rsqrt..`.
        r"triton_\w+_fused\w*_mean\w*_rsqrt|triton_\w+_fused\w*var_mean\w*rsqrt",
    ),  # fmt: skip
    # Attention: FlashAttention 2/3, FlashInfer prefill/decode, FlashMLA/cutlass MLA,
    # FMHA (xformers/cuDNN/CK), vLLM/ROCm paged and unified attention, Triton decode
    # attention, plus the KV-cache writes and rotary embedding that belong to it.
    (
        "attention",
        r"flash|fmha|mla_|_mla|flashmla|attention|attn|paged_attention|"
        r"BatchPrefill|BatchDecode|SinglePrefill|SingleDecode|sdpa|"
        r"reshape_and_cache|store_kvcache|kv_?cache|kv_indices|rotary|rope_|"
        r"reduce_segments|_fwd_kernel|_fwd_grouped_kernel|decode_kernel",
    ),  # fmt: skip
    # Dtype casts and (de)quantisation: FP8/FP4/INT8 quant kernels (incl. block-scale:
    # TRT-LLM `quantize_with_block_size`, `per_token_group_quant_8bit`, `cvt_fp16_to_fp4`),
    # casting copies
    # (named `*_copy_kernel` with a dtype, or copies with LoadWithCast).
    (
        "cast_quant",
        r"quant|bfloat16_copy|float16_copy|half_copy|float8_copy|"
        r"bfloat16tofloat|floattobfloat|to_copy|WithCast|cvt_fp|fp8_cast|"
        r"dtype_convert",
    ),  # fmt: skip
    # GEMM: cuBLAS/cuBLASLt (xmma, nvjet, sm90/sm80 tiles, gemv, split-K reduce), CUTLASS,
    # Marlin dense, DeepGEMM, hipBLASLt/Tensile (Cijk_), CK GEMM, ROCm skinny wvSplitK,
    # Triton matmul, cuDNN convolutions (implicit GEMM, winograd), TRT-LLM-gen `bmm_*`.
    (
        "gemm",
        r"gemm|gemv|cublas|nvjet|xmma|cutlass|marlin|Cijk_|wvSplitK|LLGemm|^bmm_|"
        r"matmul|_mm_|scaled_mm|splitKreduce|dot_kernel|convolution|conv\d|_conv_|"
        r"implicit_convolve|winograd|cudnn|"
        r"cask_|s16816|s1688|h16816|volta_|ampere_|turing_|sm\d+_",
    ),  # fmt: skip
    # Memory movement: copies, concat, gather/scatter, index select, fill/zero, pad.
    (
        "memory",
        r"copy|memcpy|memset|CatArray|cat_|index_?select|indexSelect|gather|"
        r"scatter|fill|zero|transpose|permute|contiguous|pad|embedding|"
        r"rocclr|roll|flip",
    ),  # fmt: skip
    # Elementwise and reductions: torch TensorIterator kernels, activations (SiLU/GELU,
    # act_and_mul), Triton pointwise/reduction, softmax, generic reduces.
    (
        "elementwise",
        r"elementwise|silu|gelu|swiglu|relu|act_and_mul|activation|"
        r"triton_(poi|red|per)_|softmax|reduce_kernel|reduce|add|mul|"
        r"div|sum|mean|exp|log|sigmoid|tanh|pow|sqrt|neg|clamp",
    ),  # fmt: skip
)

# Top-level CPU ops (CPU-only traces): aten/c10d names into the same categories.
CPU_OP_PATTERNS: tuple[tuple[str, str], ...] = (
    # Collectives through c10d (gloo on CPU, NCCL wrappers): the op name says which.
    ("allreduce", r"all_?reduce"),
    ("all_to_all", r"all_?to_?all"),
    ("allgather", r"all_?gather"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("other_comm", r"c10d::|gloo|nccl|broadcast|barrier|record_param_comms"),
    # MoE routing and top-k, sampling.
    ("moe", r"moe|topk|expert|router|routing|gating"),
    ("sampling", r"multinomial|argmax|sampl"),
    # Attention.
    ("attention", r"attention|flash|sdpa|mla"),
    # GEMMs.
    (
        "gemm",
        r"aten::(linear|mm|addmm|bmm|baddbmm|matmul|einsum|_scaled_mm|addmv|mv|"
        r"conv|convolution|_convolution|mkldnn)|gemm",
    ),  # fmt: skip
    # Norms.
    ("norm", r"norm"),
    # Casts: tensor dtype conversions.
    ("cast_quant", r"aten::(to|_to_copy|type_as|half|float|bfloat16)$|quant"),
    # Memory.
    (
        "memory",
        r"aten::(copy_|cat|index_select|embedding|empty\w*|zeros\w*|ones\w*|fill_|"
        r"zero_|clone|contiguous|stack|gather|scatter\w*|index\w*|view|reshape|"
        r"permute|transpose|narrow|slice|select|split\w*|chunk|expand|pad)\b",
    ),  # fmt: skip
    # Elementwise/reductions.
    ("elementwise", r"aten::"),
)

# CPU ops whose GPU kernels all belong to one category, whatever the kernels' names: a
# routed-expert GEMM launched inside a MoE layer is MoE time, not dense GEMM. A kernel takes
# the category of the innermost such op around its launch (linked by correlation id);
# communication kernels keep their own category. Matched case-sensitively at the start of
# the op name (the reader also uses these patterns to keep the ops in GPU traces, so they
# must not match across a '"').
ENCLOSING_OP_PATTERNS: tuple[tuple[str, str], ...] = (
    # MoE layers: Stepscope's profile workload (stepscope::moe); vLLM's FusedMoE custom ops
    # (vllm::moe_forward, moe_forward_shared, out-of-tree libraries named vllm_*), spelled
    # `vllm.moe_forward` by torch.compile'd graphs; vLLM fused-experts ops
    # (inplace/outplace_fused_experts, fused_marlin_moe); TensorRT-LLM's trtllm::fused_moe.
    (
        "moe",
        r"stepscope::moe\b|vllm\w*(?:::|\.)(?:moe_forward\w*|\w*fused_experts\w*|"
        r"\w*fused_moe\w*|\w*marlin_moe\w*)|trtllm::fused_moe\w*|"
        # FlashInfer's TRT-LLM-gen fused MoE ops (`trtllm_fp4_block_scale_moe`, ...): their
        # expert GEMMs are named `bmm_*` like dense FP4 GEMMs
        r"flashinfer\w*(?:::|\.)\w*moe\w*",
    ),  # fmt: skip
    # Attention: Stepscope's MLA attention op; vLLM's unified attention ops (unified_attention,
    # unified_attention_with_output, MLA variants); torch SDPA (its math backend is bmm +
    # softmax); TensorRT-LLM's trtllm::attention.
    (
        "attention",
        r"stepscope::(?:mla|gqa)_attention\b|vllm\w*(?:::|\.)unified_\w*attention\w*|"
        r"aten::_?scaled_dot_product\w*|trtllm::attention\w*",
    ),  # fmt: skip
)

# The vocab-parallel embedding, whose AllReduce the step anatomy names ``embedding``:
# ``VocabParallelEmbedding.forward`` looks the tokens up, masks the other ranks' rows and
# calls ``tensor_model_parallel_all_reduce`` (vllm-project/vllm
# vllm/model_executor/layers/vocab_parallel_embedding.py @ 00db0119c376; SGLang's
# python/sglang/srt/layers/vocab_parallel_embedding.py is the same class). Its subclass
# ParallelLMHead raises in ``forward`` (the logits GEMM runs in the sampler), so no
# logits work runs in this frame. torch.profiler's Python tracer (``with_stack=True``,
# vLLM's default) names the module call ``nn.Module: VocabParallelEmbedding_0`` and the
# frame ``.../vocab_parallel_embedding.py(NNN): forward``; matched against the whole
# name (the reader keeps these frames, so the pattern must not cross a '"').
EMBEDDING_FRAME = (r"nn\.Module: VocabParallelEmbedding_\d+|"
                   r"[^\"]{0,400}vocab_parallel_embedding\.py\(\d+\): forward")  # fmt: skip
# The eager lookup's CPU op: the kernels it launches (``vectorized_gather_kernel``,
# ``indexSelect*``) are the embedding, whatever their names.
EMBEDDING_OP = "aten::embedding"


def _lowercase_pattern(pattern: str) -> str:
    """``pattern`` for lowercased text: literals lowercased, escapes (\\b, \\w, \\d) kept.

    Searching ``name.lower()`` with this pattern finds what an IGNORECASE search of
    ``name`` finds, ~5x faster on long templated kernel names: sre cannot skip ahead by a
    pattern's first characters under IGNORECASE, so it tries every branch at every offset
    (0.21 s -> 0.04 s for the 334 kernel names of the fixtures; a small trace's import is
    ~0.3 s). A test checks that every fixture name gets the same category both ways.
    """
    return re.sub(r"(\\.)|(.)", lambda m: m[1] or m[2].lower(), pattern, flags=re.S)


_KERNEL_RE = [(cat, re.compile(_lowercase_pattern(p))) for cat, p in KERNEL_PATTERNS]
_ENCLOSING_RE = [(cat, re.compile(p)) for cat, p in ENCLOSING_OP_PATTERNS]
_CPU_RE = [(cat, re.compile(_lowercase_pattern(p))) for cat, p in CPU_OP_PATTERNS]
_GENERIC_NCCL = re.compile(r"nccl\w*_(sendrecv|send|recv|generic)|ncclDevKernel_Generic", re.I)
_DIRECT_COPY = re.compile(r"direct_copy_kernel", re.I)


@lru_cache(maxsize=65536)
def kernel_category(name: str) -> str:
    """Category of a GPU kernel from its name alone (case-insensitive)."""
    lowered = name.lower()
    return next((cat for cat, rx in _KERNEL_RE if rx.search(lowered)), "other")


@lru_cache(maxsize=16384)
def cpu_op_category(name: str) -> str:
    """Category of a top-level CPU op (CPU-only traces; case-insensitive)."""
    lowered = name.lower()
    return next((cat for cat, rx in _CPU_RE if rx.search(lowered)), "other")


@lru_cache(maxsize=16384)
def enclosing_op_category(name: str) -> str | None:
    """Category a CPU op imposes on the GPU kernels it launches, or None."""
    return next((cat for cat, rx in _ENCLOSING_RE if rx.match(name)), None)


def needs_collective(name: str) -> bool:
    """NCCL kernels whose name does not say which collective they serve."""
    return bool(_GENERIC_NCCL.search(name))


def is_direct_copy(name: str) -> bool:
    """``direct_copy_kernel_cuda`` serves both copies and casts (the CPU op decides)."""
    return bool(_DIRECT_COPY.search(name)) and "WithCast" not in name


_COLLECTIVES = {
    "allreduce": "allreduce", "alltoall": "all_to_all", "alltoallv": "all_to_all",
    "alltoallbase": "all_to_all", "allgather": "allgather", "allgatherbase": "allgather",
    "allgatherintotensor": "allgather", "allgathercoalesced": "allgather",
    "reducescatter": "reduce_scatter", "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter", "broadcast": "other_comm",
    "send": "other_comm", "recv": "other_comm", "sendrecv": "other_comm",
    "reduce": "other_comm", "gather": "other_comm", "scatter": "other_comm",
    "barrier": "other_comm", "allreducecoalesced": "allreduce",
}  # fmt: skip


def collective_category(label: str | None) -> str | None:
    """Category from a collective's name: ``Collective name`` arg or a CPU annotation
    (``nccl:all_to_all``, ``c10d::alltoall_base_``, ``all_gather_into_tensor``)."""
    if not label:
        return None
    key = label.split(":")[-1].lower().replace("_", "").strip()
    return _COLLECTIVES.get(key)


# Collective dtypes: NCCL spells them in the kernel name (`_bf16_`, `_Sum_float`,
# `int8_t`), the profiler in the kernel's `dtype` arg (`BFloat16`, `Float8_e4m3fn`),
# custom kernels in their template arguments (`__nv_bfloat16`, `c10::Half`).
_DTYPE_ARG = {
    "bfloat16": "bf16", "half": "f16", "float16": "f16", "float": "f32", "float32": "f32",
    "double": "f64", "float64": "f64", "float8_e4m3fn": "f8e4m3", "float8_e4m3fnuz": "f8e4m3",
    "float8_e5m2": "f8e5m2", "float8_e5m2fnuz": "f8e5m2", "char": "i8", "int8": "i8",
    "byte": "u8", "uint8": "u8", "int": "i32", "int32": "i32", "long": "i64", "int64": "i64",
    "bool": "bool", "short": "i16",
    # CPU ops' "Input type" spells tensors' C++ scalar types (`c10::` is stripped)
    "long int": "i64", "signed char": "i8", "unsigned char": "u8", "short int": "i16",
}  # fmt: skip
_DTYPE_NAME = (
    ("f8e4m3", r"f8e4m3|fp8_?e4m3|e4m3"),
    ("f8e5m2", r"f8e5m2|fp8_?e5m2|e5m2"),
    ("bf16", r"bf16|bfloat16|__nv_bfloat16|hip_bfloat16"),
    ("f16", r"_f16|_half|__half|c10::Half|float16|_fp16"),
    ("f64", r"_f64|_double\b|double"),
    ("f32", r"_f32|_float\b|_float_|\bfloat\b|_fp32"),
    ("i8", r"_i8|int8_t|_int8\b|_int8_"),
    ("u8", r"_u8|uint8_t|_uint8"),
    ("i32", r"_i32|int32_t|_int32"),
    ("i64", r"_i64|int64_t|_int64"),
    ("u32", r"_u32|uint32_t"),
    ("u64", r"_u64|uint64_t"),
)
_DTYPE_NAME_RE = [(d, re.compile(p, re.IGNORECASE)) for d, p in _DTYPE_NAME]


@lru_cache(maxsize=16384)
def collective_dtype(name: str, arg_dtype: str | None = None) -> str | None:
    """Normalised dtype of a collective kernel: the ``dtype`` arg wins over the name
    (NCCL SendRecv moves bytes, so its name says int8 whatever the tensor was)."""
    return _arg_dtype(arg_dtype) or next((d for d, rx in _DTYPE_NAME_RE if rx.search(name)), None)


def _arg_dtype(label: str | None) -> str | None:
    """``BFloat16``, ``torch.float16``, ``c10::Half``, ``float`` -> bf16, f16, f16, f32."""
    if not label:
        return None
    return _DTYPE_ARG.get(label.strip().lower().removeprefix("torch.").removeprefix("c10::"))


def input_dtype(args: dict) -> str | None:
    """The dtype label a CPU op's args carry: ``dtype`` (record_param_comms), else the first
    tensor of ``Input type`` (``['float']`` on a gloo all_reduce; "", "Scalar" and
    "TensorList" entries say nothing). Returned raw; ``collective_dtype`` normalises it."""
    types = args.get("Input type")
    candidates = [args.get("dtype"), *(types if types.__class__ is list else ())]
    return next((t for t in candidates if t.__class__ is str and _arg_dtype(t)), None)
