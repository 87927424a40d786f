"""What each serving engine's scheduler does by default, from its source (not fitted).

vLLM V1 (vllm-project/vllm, vllm/engine/arg_utils.py ``EngineArgs.get_batch_defaults``,
v0.10-0.19): the OpenAI server's ``max_num_batched_tokens`` is 8192 on GPUs with >= 70 GiB
that are not A100, else 2048; chunked prefill is on and a step schedules the running
requests' decode tokens first, then prompt chunks FCFS in what is left of the budget.
Async scheduling prepares step n+1 on the CPU while the GPU runs step n.

SGLang (sgl-project/sglang, python/sglang/srt/server_args.py): ``chunked_prefill_size``
2048 below 35 GB of GPU memory, 8192 below 160 GB, 16384 above (B200, B300, GB200), set in
``_handle_gpu_memory_settings``; with DP attention ``_handle_data_parallelism`` (run after
it in ``__post_init__``) divides it by ``dp_size``: the size is global, each attention rank
gets its share (the memory reserve below is sized before the division);
``enable_mixed_chunk = False``: a prefill batch runs on its own, decode waits for it;
``disable_overlap_schedule = False``: the overlap scheduler hides the CPU's per-batch work.

TensorRT-LLM (NVIDIA/TensorRT-LLM, tensorrt_llm/llmapi/llm_args.py): ``max_num_tokens``
8192, ``enable_chunked_prefill = False`` (a prompt is one context chunk), in-flight batching
mixes context and generation requests in one iteration; ``disable_overlap_scheduler =
False`` (overlap on); ``SchedulerConfig.capacity_scheduler_policy = GUARANTEED_NO_EVICT``:
a request starts only when the KV cache has room for all its tokens, prompt and output
(vLLM and SGLang admit on the blocks in use and preempt or retract when they run out).

Shared experts beside the routed experts: every engine runs a small batch's shared expert on
a second CUDA stream while the routed experts run. vLLM: ``SharedExperts`` on ``aux_stream()``
up to ``VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD`` = 256 tokens
(vllm/model_executor/layers/fused_moe/runner/shared_experts.py
``_determine_shared_experts_order``); SGLang: ``forward_normal_dual_stream`` up to 1,024
tokens (python/sglang/srt/models/deepseek_v2.py ``DUAL_STREAM_TOKEN_THRESHOLD``), or the
shared expert fused into the routed kernel; TensorRT-LLM: ``maybe_execute_in_parallel`` on
the MoE's ``aux_stream`` (tensorrt_llm/_torch/models/modeling_deepseekv3.py), multi-stream
only inside captured CUDA graphs (its default graph batch sizes reach 128).

With every engine overlapping its CPU work, the per-step overhead is 0: what a step costs is
its kernels (planner.cost.step).

KV cache room after the weights: vLLM ``--gpu-memory-utilization 0.9`` of the whole GPU less
the profiled activations / CUDA graphs (``reserve``); SGLang ``mem_fraction_static`` =
(memory - reserved) / memory with reserved = 512 MiB + 1.5 MiB x max(chunk, 2048) + 2 MiB x
cuda_graph_max_bs (512) + tp / 8 GiB, at least 10 GiB above 60 GiB (server_args.py
``_handle_gpu_memory_settings``); TRT-LLM ``KvCacheConfig.free_gpu_memory_fraction = 0.9`` of
what is free once the weights and activations are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs.hardware import GIB, HardwareSpec


@dataclass(frozen=True)
class Engine:
    name: str
    mixed: bool  # decode tokens and prompt chunks share one step
    chunked: bool  # prompts longer than the budget are split over steps
    overlap: bool  # CPU scheduling overlapped with the GPU step
    reserve_whole: bool = False  # admits a request only with KV room for all I + O tokens

    def token_budget(self, hw: HardwareSpec, isl: int, attention_dp: int = 1,
                     launched: int = 0) -> int:  # fmt: skip
        """Prompt + decode tokens one step may carry per attention rank, of
        ``attention_dp`` DP-attention ranks. ``launched``: the engine's flag as the server was
        started with (vLLM ``--max-num-batched-tokens``, per DP engine; SGLang
        ``--chunked-prefill-size``, global; TRT-LLM ``--max_num_tokens``); 0 = its default."""
        mem = hw.memory_bytes
        if self.name == "vllm":
            big = mem >= 70 * GIB and "a100" not in hw.gpu_model.lower()
            return launched or (8192 if big else 2048)
        if self.name == "sglang":
            return max((launched or self.sglang_chunk(hw)) // max(attention_dp, 1), 1)
        return launched or max(8192, isl)  # TRT-LLM: one context chunk per prompt, not split

    def max_running(self, hw: HardwareSpec, kv_tokens: int, context_len: int,
                    attention_dp: int = 1, launched: int = 0) -> int:  # fmt: skip
        """Requests one attention rank runs at once. ``launched``: vLLM ``--max-num-seqs``
        (per DP engine), SGLang ``--max-running-requests`` (global, split over DP ranks),
        TRT-LLM ``--max_batch_size``; 0 = its default:

        - vLLM: 1024 on GPUs of 70 GiB and more but A100, else 256
          (vllm/engine/arg_utils.py ``EngineArgs.get_batch_defaults``, OpenAI server);
        - SGLang: min(clamp(KV tokens / context length x 512, 2048, 4096), KV tokens / 2)
          per DP worker; a launched value is split over the workers and capped the same
          (python/sglang/srt/mem_cache/kv_cache_configurator.py ``resolve_max_num_reqs``);
        - TensorRT-LLM: ``max_batch_size`` 2048 (tensorrt_llm/llmapi/llm_args.py).
        """
        if self.name == "vllm":
            big = hw.memory_bytes >= 70 * GIB and "a100" not in hw.gpu_model.lower()
            return launched or (1024 if big else 256)
        if self.name == "sglang":
            if launched:
                return max(min(launched // max(attention_dp, 1), kv_tokens // 2), 1)
            est = max(min(int(kv_tokens / max(context_len, 1) * 512), 4096), 2048)
            return max(min(est, kv_tokens // 2), 1)
        return launched or 2048

    @staticmethod
    def sglang_chunk(hw: HardwareSpec) -> int:
        """SGLang's default ``chunked_prefill_size`` for this GPU, before any DP division."""
        mem = hw.memory_bytes
        return 2048 if mem < 35 * GIB else 8192 if mem < 160 * GIB else 16384

    def kv_budget_bytes(self, hw: HardwareSpec, weights: float, tp: int, isl: int,
                        memory_utilization: float, reserve: float,
                        launched_chunk: int = 0) -> float:  # fmt: skip
        """Bytes per GPU the engine gives its KV cache (may be <= 0: does not fit)."""
        mem = hw.memory_bytes
        if self.name == "sglang":
            chunk = launched_chunk or self.sglang_chunk(hw)
            mib = 512 + 1.5 * max(chunk, 2048) + 2 * 512 + tp / 8 * 1024
            reserved = max(mib, 10 * 1024 if mem > 60 * GIB else 0.0) * 2**20
            return mem - reserved - weights
        if self.name == "trtllm":
            return 0.9 * (mem - weights - reserve)
        return mem * memory_utilization - weights - reserve


ENGINES: dict[str, Engine] = {
    "vllm": Engine("vllm", mixed=True, chunked=True, overlap=True),
    "sglang": Engine("sglang", mixed=False, chunked=True, overlap=True),
    "trtllm": Engine("trtllm", mixed=True, chunked=False, overlap=True, reserve_whole=True),
}


def budget_text(engine: str, hw: HardwareSpec, isl: int, launched: int) -> str:
    """How an assumptions list names the token budget a prediction used, with its number."""
    n = ENGINES[engine].token_budget(hw, isl, 1, launched)
    where = "--token-budget" if launched else f"{engine}'s default for this GPU"
    if engine == "sglang":
        return f"chunked prefill {n} tokens per step, split over DP-attention ranks ({where})"
    return f"token budget {n} per step ({where})"


# Tokens per step up to which the engine runs the shared expert beside the routed experts.
SHARED_OVERLAP_TOKENS = {"vllm": 256, "sglang": 1024, "trtllm": 128}


def shared_overlap_tokens(engine: str) -> int:
    return SHARED_OVERLAP_TOKENS.get(engine, 0)
