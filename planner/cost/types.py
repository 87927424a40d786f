"""What one serving prediction is asked about: the instance's layout and the workload.

Below planner.cost.serving, planner.cost.step and planner.cost.step_comm, which all use them.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.expert_load import ExpertLoad


@dataclass(frozen=True)
class ServeLayout:
    """One instance: attention TP x DP ranks; MoE split moe_tp (tensor) x moe_ep (experts);
    how the MoE layers exchange tokens under EP (``a2a``) and which AllReduce TP uses."""

    tp: int
    dp: int = 1
    moe_tp: int = 0  # 0 = tp x dp / moe_ep
    moe_ep: int = 1
    a2a: str = ""  # "" = the engine's default; allgather_reducescatter | deepep_*
    allreduce: str = "all_reduce"  # all_reduce (NCCL) | all_reduce_fast (custom / PCIe-IPC)

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def moe_tensor(self) -> int:
        return self.moe_tp or max(self.gpus // max(self.moe_ep, 1), 1)

    def describe(self) -> str:
        parts = [f"TP={self.tp}"] + ([f"DP={self.dp} (attention)"] if self.dp > 1 else [])
        if self.moe_ep > 1:
            parts.append(f"EP={self.moe_ep}")
        if self.a2a:
            parts.append(f"({self.a2a})")
        if self.allreduce == "all_reduce_fast":
            parts.append("+ fast AllReduce")
        return " ".join(parts)


@dataclass(frozen=True)
class Workload:
    isl: int
    osl: int
    engine: str = "vllm"
    kv_dtype: str = ""  # "" = the checkpoint's native KV dtype
    cuda_graphs: bool = True
    a2a_dtype: str = ""  # "" = native dispatch / combine payloads; fp8_e4m3 = a downcast
    activations: str = ""  # "" = native; fp8_e4m3 = W4A8 Marlin inputs (a downcast)
    num_prompts: int = 0  # 0 = the benchmark's default (planner.sched.bench)
    token_budget: int = 0  # tokens per engine step as launched; 0 = the engine's default
    # TensorRT-LLM attention DP: attention_dp_config enable_balance with this timeout_iters;
    # 0 = balance off (its default)
    adp_balance_iters: int = 0
    # SGLang --scheduler-recv-interval: decode steps between polls for new requests (default 1)
    recv_interval: int = 1
    # TensorRT-LLM batch waiting: batch_wait_timeout_iters and batch_wait_max_tokens_ratio
    # (share of max_num_tokens); 0 = off (its default)
    batch_wait_iters: int = 0
    batch_wait_ratio: float = 0.0
    # A measured routing distribution for the routed experts (None: uniform top-k)
    expert_load: ExpertLoad | None = None
    # The benchmark client (planner.sched.bench): inferencex (the fit's: 10 x C prompts,
    # lengths uniform in [0.8 L, L]), vllm or sglang; its --random-range-ratio (-1: the
    # tool's default)
    bench: str = "inferencex"
    range_ratio: float = -1.0
    # requests the engine runs at once per instance (vLLM --max-num-seqs, SGLang
    # --max-running-requests, TRT-LLM --max_batch_size); 0 = the engine's default
    max_running: int = 0
