"""Issue 20 item 2: the step anatomy names the embedding AllReduce ``embedding``.

Eager vLLM traces name it from the module stack: ``VocabParallelEmbedding.forward`` looks the
tokens up and calls ``tensor_model_parallel_all_reduce`` (vllm-project/vllm
vllm/model_executor/layers/vocab_parallel_embedding.py @ 00db0119c376), and torch.profiler's
Python tracer (with_stack=True, vLLM's default) writes the frames ``nn.Module:
VocabParallelEmbedding_0`` and ``.../vocab_parallel_embedding.py(N): forward`` (the names a
real torch 2.13 profile of such a module gives). Under CUDA graphs no CPU op runs in a
replay: the AllReduce before a step's first attention is the embedding's."""

from __future__ import annotations

import numpy as np
import pytest

from collectors.trace import anatomy
from collectors.trace.ingest import ingest_traces
from tests.trace.graph_synth import EMBED_GATHER, FUSED_MOE, MASKED_FILL, graph_run
from tests.trace.synth import (
    ADD_NORM,
    CUSTOM_AR,
    FLASH,
    GATHER,
    NORM,
    NVJET,
    SILU,
    TOPK,
    TOPK_SAMPLE,
    TraceBuilder,
)

LAYERS, DENSE = 61, 3  # DeepSeek-V3 / Kimi-K2: 61 layers, the first 3 dense
EMB_FRAMES = ("nn.Module: VocabParallelEmbedding_0",
              "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/"
              "vocab_parallel_embedding.py(463): forward")  # fmt: skip


class _Eager:
    """Kernels launched one by one on the CPU, run back to back on the GPU."""

    def __init__(self, b: TraceBuilder, t: float) -> None:
        self.b, self.t, self.g = b, t, t + 500.0

    def launch(self, name: str, dur: float = 5.0) -> None:
        self.b.kernel(name, self.t, self.g, dur)
        self.t += 3.0
        self.g += dur + 1.0

    def op(self, name: str, kernels: list[str]) -> None:
        """A CPU op (``aten::embedding``, ``vllm::moe_forward``...) around its launches."""
        start = self.t
        self.t += 1.0
        for k in kernels:
            self.launch(k)
        self.b.cpu("cpu_op", name, start, self.t - start)
        self.t += 1.0


def eager_tp8_trace(path, steps: int = 2, frames: bool = True, embedding_op: bool = True):
    """A vLLM TP=8 decode trace of a DeepSeek/Kimi-shaped model, eager (no graphs): the
    embedding (lookup, mask, AllReduce), per layer MLA attention + o_proj + AllReduce and a
    dense MLP (first 3) or MoE + AllReduce, then the logits GEMM, AllGather and sampler.
    ``frames=False``: profiled without with_stack; ``embedding_op=False``: no aten op
    around the lookup either (what the issue's trace looked like to the old anatomy)."""
    b = TraceBuilder(rank=0, world_size=8)
    t = 10_000.0
    for i in range(steps):
        e = _Eager(b, t)
        start = e.t
        if embedding_op:
            e.op("aten::embedding", [EMBED_GATHER])
        else:
            e.launch(EMBED_GATHER)
        e.launch(MASKED_FILL)
        e.op("vllm::all_reduce", [CUSTOM_AR])
        if frames:
            for k, name in enumerate(EMB_FRAMES):
                b.cpu("python_function", name, start - 2 + k, e.t - start + 4 - 2 * k)
        for layer in range(LAYERS):
            e.launch(NORM if layer == 0 else ADD_NORM)
            e.launch(NVJET)
            e.op("vllm::unified_attention_with_output", [FLASH])
            e.launch(NVJET)
            e.op("vllm::all_reduce", [CUSTOM_AR])
            e.launch(ADD_NORM)
            if layer < DENSE:
                for k in (NVJET, SILU, NVJET):
                    e.launch(k)
            else:
                e.launch(NVJET)  # router
                e.op("vllm::moe_forward", [TOPK, FUSED_MOE, FUSED_MOE])
            e.op("vllm::all_reduce", [CUSTOM_AR])
        e.launch(NORM)
        e.launch(NVJET)  # logits
        e.launch(GATHER)
        e.launch(TOPK_SAMPLE)
        b.cpu("user_annotation", f"execute_context_0(0)_generation_{8 + i}({8 + i})", t,
              e.t - t + 10)  # fmt: skip
        t = max(e.t, e.g) + 1000.0
    return b.write(path)


def _per_step(summary: dict, steps: int) -> dict[tuple[str, str], float]:
    return {(cat, src): v["calls"] / steps for cat, per in summary["comm_sources"].items()
            for src, v in per.items()}  # fmt: skip


@pytest.mark.parametrize(("frames", "embedding_op"), [(True, True), (True, False), (False, True)])
def test_eager_tp8_deepseek_step_names_its_embedding_allreduce(tmp_path, frames, embedding_op):
    path = eager_tp8_trace(tmp_path / "w_rank0.pt.trace.json", 2, frames, embedding_op)
    s = ingest_traces([path]).summary
    assert s["steps"] == 2
    assert _per_step(s, 2) == {
        ("allreduce", "embedding"): 1, ("allreduce", "attention"): LAYERS,
        ("allreduce", "mlp"): DENSE, ("allreduce", "moe"): LAYERS - DENSE,
        ("allgather", "logits"): 1,
    }  # fmt: skip


def test_eager_trace_that_says_nothing_of_the_embedding_keeps_it_other(tmp_path):
    """Without the frames, the aten op or a kernel named so, an eager trace does not say
    which module issued the first AllReduce (the position rule is for graph replays)."""
    path = eager_tp8_trace(tmp_path / "w_rank0.pt.trace.json", 1, False, False)
    got = _per_step(ingest_traces([path]).summary, 1)
    assert got[("allreduce", "other")] == 1 and ("allreduce", "embedding") not in got


def test_graph_run_embedding_allreduce_by_position(tmp_path):
    facts = graph_run(tmp_path / "t", ranks=2, steps=4, layers=4, dense_layers=1)
    s = ingest_traces([tmp_path / "t"]).summary
    assert _per_step(s, facts.ranks * facts.steps) == {
        ("allreduce", "embedding"): 1, ("allreduce", "attention"): 4,
        ("allreduce", "mlp"): 1, ("allreduce", "moe"): 3, ("allgather", "logits"): 1,
    }  # fmt: skip


def test_embedding_kernel_names_but_not_rotary_embedding():
    names = ["void vllm::rotary_embedding_kernel<c10::BFloat16, true>(...)",
             "triton_poi_fused_embedding_0", "void at::native::indexSelectLargeIndex<...>",
             "batched_rotary_embedding_kernel", NVJET]  # fmt: skip
    got = anatomy.embedding_names(names, np.arange(len(names)))
    assert got.tolist() == [False, True, True, False, False]
