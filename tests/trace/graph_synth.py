"""vLLM V1 decode traces under CUDA graphs, shaped like the Kineto files vLLM writes by default.

What the real files show (issue 20; /work/shared/REFERENCE.md section 6), and what is built:
- each step is a CPU ``user_annotation`` ``execute_context_0(0)_generation_1(1)`` of 5-10 ms;
  inside it an H2D input copy, one ``cudaGraphLaunch`` (every kernel of the replay carries
  its correlation id) and the eager logits GEMM, vocab AllGather and sampler;
- the GPU runs each step for most of the step spacing (the TPOT), in one stream;
- the ``gpu_user_annotation`` events of the step's name cannot be trusted: each spans
  25-29 ms, there are two per step (two streams), they are written in reverse time order,
  and ``placement="stacked"`` starts them all within 0.4 ms of the first step's GPU start
  (the GH200 trace), ``"own"`` starts each at its own step's GPU start.

Kernel names are real ones (tests/trace/synth.py, tests/trace/test_taxonomy_real.py).
``GraphFacts`` are the figures built in, to compare the analysis with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.trace.synth import (
    ADD_NORM,
    COMBINE,
    FLASH,
    GATHER,
    NORM,
    NVJET,
    ROPE,
    SILU,
    TOPK,
    TOPK_SAMPLE,
    TraceBuilder,
)

STEP_NAME = "execute_context_0(0)_generation_1(1)"
EMBED_GATHER = ("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, "
                "long, long, long, long, bool)")  # fmt: skip
MASKED_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
               "namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)"
               "::{lambda()#1}, at::detail::Array<char*, 3> >(int, ...)")  # fmt: skip
NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
FUSED_MOE = "fused_moe_kernel"
# (name, intended category, duration us) in graph order
EMBEDDING = [(EMBED_GATHER, "memory", 8.0), (MASKED_FILL, "memory", 3.0),
             (NCCL_AR, "allreduce", 30.0)]  # fmt: skip
ATTENTION = [(NORM, "norm", 20.0), (NVJET, "gemm", 150.0), (ROPE, "attention", 15.0),
             (FLASH, "attention", 400.0), (COMBINE, "attention", 40.0), (NVJET, "gemm", 120.0),
             (NCCL_AR, "allreduce", 150.0)]  # fmt: skip
MOE = [(ADD_NORM, "norm", 20.0), (NVJET, "gemm", 30.0), (TOPK, "moe", 15.0),
       (FUSED_MOE, "moe", 380.0), (FUSED_MOE, "moe", 380.0), (NCCL_AR, "allreduce", 150.0)]  # fmt: skip
DENSE = [(ADD_NORM, "norm", 20.0), (NVJET, "gemm", 300.0), (SILU, "elementwise", 20.0),
         (NVJET, "gemm", 300.0), (NCCL_AR, "allreduce", 150.0)]  # fmt: skip
TAIL = [(NVJET, "gemm", 200.0), (GATHER, "allgather", 60.0), (TOPK_SAMPLE, "sampling", 40.0)]
GAP_US = 2.0  # between two kernels of a step on the GPU
TPOT_US = 31_000.0


@dataclass
class GraphFacts:
    """What was built: per rank and step, the GPU time of each intended category."""

    tpot_us: float
    steps: int
    ranks: int
    layers: int
    dense_layers: int
    kernels_per_step: int
    category_us_per_step: dict[str, float] = field(default_factory=dict)
    gpu_us_per_step: float = 0.0  # summed kernel + copy time of one step
    first_gpu_start: dict[int, float] = field(default_factory=dict)  # rank -> us
    last_gpu_end: dict[int, float] = field(default_factory=dict)


def _graph_kernels(layers: int, dense_layers: int, stretch: float) -> list[tuple[str, str, float]]:
    seq = list(EMBEDDING)
    for i in range(layers):
        seq += ATTENTION + (DENSE if i < dense_layers else MOE)
    seq.append((NORM, "norm", 20.0))
    return [(n, c, d * stretch) for n, c, d in seq]


def stretch_for(layers: int, dense_layers: int, tpot_us: float) -> float:
    """Factor on every duration so that one step's GPU work fills ~96% of the TPOT."""
    seq = _graph_kernels(layers, dense_layers, 1.0) + TAIL
    busy = sum(d for _, _, d in seq) + GAP_US * len(seq)
    return 0.96 * tpot_us / busy


def vllm_graph_trace(path: Path, rank: int, facts: GraphFacts, placement: str = "stacked",
                     tpot_us: float | None = None) -> Path:  # fmt: skip
    """One rank's trace file (see the module docstring)."""
    tpot = tpot_us or facts.tpot_us
    stretch = stretch_for(facts.layers, facts.dense_layers, tpot)
    graph = _graph_kernels(facts.layers, facts.dense_layers, stretch)
    tail = [(n, c, d * stretch) for n, c, d in TAIL]
    b = TraceBuilder(rank=rank, world_size=facts.ranks)
    gpu_free = 0.0
    annotations: list[dict] = []
    per_cat: dict[str, float] = {}
    t0 = 1_000_000.0 + 37.0 * rank  # ranks start a little apart
    for k in range(facts.steps):
        t = t0 + k * tpot
        b.cpu("user_annotation", STEP_NAME, t, 5000.0 + (k * 700.0) % 5000.0)
        # the step's inputs: one H2D copy, launched first
        copy_start = max(t + 250.0, gpu_free + GAP_US)
        b.kernel("Memcpy HtoD (Pinned -> Device)", t + 200.0, copy_start, 10.0, cat="gpu_memcpy")
        g = copy_start + 10.0 + GAP_US
        if k == 0:
            facts.first_gpu_start[rank] = copy_start
        b.corr += 1
        b.cpu("cuda_runtime", "cudaGraphLaunch", t + 400.0, 25.0, correlation=b.corr)
        step_gpu_start = g
        for name, cat, dur in graph:
            b.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                             "ts": g, "dur": dur, "args": {"stream": 7, "correlation": b.corr,
                                                            "graph node id": 1}})  # fmt: skip
            per_cat[cat] = per_cat.get(cat, 0.0) + dur
            g += dur + GAP_US
        for j, (name, cat, dur) in enumerate(tail):
            b.kernel(name, t + 450.0 + 20.0 * j, g, dur)
            per_cat[cat] = per_cat.get(cat, 0.0) + dur
            g += dur + GAP_US
        gpu_free = g - GAP_US
        per_cat["memory"] = per_cat.get("memory", 0.0) + 10.0
        ann_start = (facts.first_gpu_start[rank] + 50.0 * k if placement == "stacked"
                     else step_gpu_start)  # fmt: skip
        for stream in (7, 13):
            annotations.append({"ph": "X", "cat": "gpu_user_annotation", "name": STEP_NAME,
                                "pid": 0, "tid": stream, "ts": ann_start,
                                "dur": 25_000.0 + 500.0 * ((k + stream) % 9),
                                "args": {"stream": stream}})  # fmt: skip
    facts.last_gpu_end[rank] = gpu_free
    b.events.extend(sorted(annotations, key=lambda e: -e["ts"]))  # reverse time order
    facts.category_us_per_step = {c: v / facts.steps for c, v in per_cat.items()}
    facts.gpu_us_per_step = sum(facts.category_us_per_step.values())
    facts.kernels_per_step = len(graph) + len(tail) + 1
    return b.write(path)


def graph_run(folder: Path, ranks: int = 4, steps: int = 8, layers: int = 8,
              dense_layers: int = 1, placement: str = "stacked") -> GraphFacts:  # fmt: skip
    """``ranks`` trace files in ``folder`` (vLLM's file names); the facts they were built on."""
    folder.mkdir(parents=True, exist_ok=True)
    facts = GraphFacts(TPOT_US, steps, ranks, layers, dense_layers, 0)
    for r in range(ranks):
        vllm_graph_trace(folder / f"dp0_pp0_tp{r}_dcp0_ep0_rank{r}.1733.pt.trace.json.gz", r,
                         facts, placement)  # fmt: skip
    return facts
