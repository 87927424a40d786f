"""Small hand-built Kineto traces for cases the real fixtures do not cover."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


class TraceBuilder:
    """Events with CPU launches and GPU kernels linked by correlation, like Kineto."""

    def __init__(self, rank: int | None = 0, world_size: int = 2) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = 100
        self.meta: dict[str, Any] = {"schemaVersion": 1}
        if rank is not None:
            self.meta["distributedInfo"] = {"backend": "nccl", "rank": rank,
                                            "world_size": world_size, "nccl_version": "2.27.3"}  # fmt: skip
        self.meta["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]

    def cpu(self, cat: str, name: str, ts: float, dur: float, **args: Any) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": 10,
                            "ts": ts, "dur": dur, "args": args})  # fmt: skip

    def kernel(self, name: str, cpu_ts: float, gpu_ts: float, dur: float, stream: int = 7,
               cat: str = "kernel", **args: Any) -> None:  # fmt: skip
        self.corr += 1
        self.cpu("cuda_runtime", "cudaLaunchKernel", cpu_ts, 2.0, correlation=self.corr)
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream,
                            "ts": gpu_ts, "dur": dur,
                            "args": {"stream": stream, "correlation": self.corr, **args}})  # fmt: skip
        # flows and python frames are dropped unparsed by the reader; include some anyway
        self.events.append({"ph": "s", "id": self.corr, "pid": 10, "tid": 10, "ts": cpu_ts,
                            "cat": "ac2g", "name": "ac2g"})  # fmt: skip
        self.cpu("python_function", "model.py(12): forward", cpu_ts, 1.0)

    def write(self, path: Path, trailer_keys: tuple[str, ...] = ("distributedInfo",)) -> Path:
        """Kineto puts distributedInfo after traceEvents; other keys go before."""
        head = {k: v for k, v in self.meta.items() if k not in trailer_keys}
        tail = {k: v for k, v in self.meta.items() if k in trailer_keys}
        doc = {**head, "traceEvents": self.events, **tail}
        text = json.dumps(doc, indent=1)
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        return path


def decode_step_trace(path: Path, rank: int = 0, steps: int = 3, **kw: Any) -> Path:
    """vLLM-style decode steps: GEMM, attention, NCCL AllReduce (bf16), per step."""
    b = TraceBuilder(rank=rank, **kw)
    t = 1000.0
    for i in range(steps):
        name = f"execute_context_0(0)_generation_{8 + i}({8 + i})"
        b.cpu("user_annotation", name, t, 300.0)
        b.kernel("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", t + 10, t + 20, 50.0)
        b.kernel("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>", t + 20,
                 t + 75, 30.0)  # fmt: skip
        b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                 t + 30, t + 110, 40.0)  # fmt: skip
        t += 1000.0
    return b.write(path)


GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
SILU = ("void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::"
        "TensorIteratorBase&)::{lambda()#1}::operator()() const, at::detail::Array<char*, 2>>")  # fmt: skip
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def op(b: TraceBuilder, name: str, ts: float, dur: float) -> None:
    """A Kineto cpu_op with the args torch.profiler(record_shapes=True) writes."""
    b.cpu("cpu_op", name, ts, dur, **{"External id": int(ts), "Sequence number": 0,
                                      "Fwd thread id": 0, "Record function id": 0,
                                      "Input type": ["c10::BFloat16", "c10::BFloat16", ""],
                                      "Input Dims": [[8, 448], [24, 448, 128], []],
                                      "Ev Idx": int(ts)})  # fmt: skip


def moe_layer_trace(path: Path) -> Path:
    """One decode step on CUDA: the same GEMM kernel launched inside ``stepscope::moe``,
    inside ``vllm::moe_forward``, inside ``vllm::unified_attention_with_output``, and by a
    plain ``aten::mm``; an NCCL AllReduce launched inside the MoE op; a GEMM launched just
    after the MoE op that runs on the GPU while the op's own kernels would (launch decides)."""
    b = TraceBuilder(rank=0, world_size=1)
    b.cpu("user_annotation", "ProfilerStep#3", 1000.0, 2000.0)
    op(b, "stepscope::moe", 1010.0, 200.0)
    op(b, "aten::matmul", 1015.0, 20.0)  # nested aten ops are skipped unparsed on GPU traces
    b.kernel(GEMM, 1020.0, 1300.0, 40.0)  # routed-expert GEMM -> moe
    b.kernel(SILU, 1050.0, 1345.0, 5.0)  # its activation -> moe
    b.kernel(AR, 1100.0, 1360.0, 30.0)  # communication keeps its category
    b.kernel("Memcpy DtoD (Device -> Device)", 1150.0, 1395.0, 2.0, cat="gpu_memcpy")
    b.kernel(GEMM, 1215.0, 1400.0, 40.0)  # launched after the op ended -> gemm
    op(b, "vllm::unified_attention_with_output", 1300.0, 100.0)
    b.kernel(GEMM, 1320.0, 1450.0, 20.0)  # MLA absorb GEMM -> attention
    op(b, "vllm::moe_forward", 1500.0, 100.0)
    b.kernel(GEMM, 1520.0, 1500.0, 20.0)  # -> moe
    op(b, "aten::mm", 1700.0, 50.0)
    b.kernel(GEMM, 1710.0, 1700.0, 20.0)  # dense -> gemm
    return b.write(path)


# Real kernel names of a vLLM MoE decode step under a FULL CUDA graph (see
# tests/trace/test_taxonomy_real.py for their sources).
NORM = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"
ROPE = "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, ...)"
FLASH = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>(...)"
COMBINE = ("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, "
           "4>, 4, 3, true>(Flash_fwd_params)")  # fmt: skip
NVJET = "nvjet_tst_128x64_64x4_1x2_h_bz_TNT"
CUSTOM_AR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, ...)"
ADD_NORM = "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, ...)"
TOPK = "void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, 32, int>(...)"
ROUTING = "void moe::dev::routing::routingCustom::routingIndicesBlockKernel<...>(...)"
BMM = ("bmm_Bfloat16_E2m1E2m1_Fp32_Ab16_Bb16_t128x128x256u2_s6_et128x128_m256x128x64_c2x1x1_rM_"
       "TN_transOut_schPd2x1x2x3_biasFp32M_bN_rgTma_clmp_dynB_sm100f")  # fmt: skip
FINALIZE = "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams>(...)"
GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
TOPK_SAMPLE = "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)"
LAYER = [NORM, NVJET, ROPE, FLASH, COMBINE, NVJET, CUSTOM_AR,  # attention block
         ADD_NORM, NVJET, TOPK, ROUTING, BMM, BMM, FINALIZE, CUSTOM_AR]  # MoE block
GRAPH_TAIL = [NORM]  # the final norm is the graph's last kernel
EAGER_TAIL = [NVJET, GATHER, TOPK_SAMPLE]  # compute_logits + sampler run eagerly


def graph_decode_trace(path: Path, rank: int, world_size: int = 4, steps: int = 8,
                       layers: int = 3, annotate: bool = True,
                       allreduce_us: float = 4.0) -> Path:  # fmt: skip
    """A vLLM decode trace captured with a FULL CUDA graph, the way Kineto writes one: each
    step's graph replay is one ``cudaGraphLaunch`` whose correlation id every kernel of the
    replay shares; the logits GEMM, the vocab AllGather and the sampler follow eagerly and
    run after the step's GPU annotation has ended. One H2D copy per step is launched
    between steps (outside every step). ``annotate=False`` drops the step annotations
    (vLLM 0.10-0.11). ``allreduce_us``: each AllReduce kernel's duration on this rank (a rank
    that arrives early waits for the others inside the kernel)."""
    b = TraceBuilder(rank=rank, world_size=world_size)
    t = 10_000.0
    name = "execute_context_0(0)_generation_32(32)"
    for _ in range(steps):
        if annotate:
            b.cpu("user_annotation", name, t, 400.0)
        b.corr += 1
        b.cpu("cuda_runtime", "cudaGraphLaunch", t + 100, 30.0, correlation=b.corr)
        g = t + 150  # GPU time
        if annotate:  # the GPU side of the annotation ends before most graph kernels ran
            b.events.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0,
                             "tid": 7, "ts": g, "dur": 20.0, "args": {}})  # fmt: skip
        for kname in LAYER * layers + GRAPH_TAIL:
            dur = allreduce_us if kname == CUSTOM_AR else 4.0
            b.events.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7,
                             "ts": g, "dur": dur, "args": {"stream": 7, "correlation": b.corr,
                                                            "graph node id": 1}})  # fmt: skip
            g += dur + 1.0
        for k, kname in enumerate(EAGER_TAIL):
            b.kernel(kname, t + 200 + 10 * k, g, 4.0)
            g += 5.0
        b.kernel("Memcpy HtoD (Pinned -> Device)", t + 600, t + 610, 2.0, cat="gpu_memcpy")
        t += 1000.0
    return b.write(path)


GRAPH_KERNELS_PER_STEP = len(LAYER) * 3 + len(GRAPH_TAIL)  # layers=3
