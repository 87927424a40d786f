"""Generate a realistic Kineto (PyTorch profiler) trace of a given size for benchmarks.

The file looks like what libkineto writes for a vLLM decode server with ``with_stack``
on: each decode step is a ``user_annotation`` ``execute_context_0(0)_generation_B(B)``
holding python_function frames (most of the events, as in real traces), cpu_ops,
``cudaLaunchKernel`` runtime calls with ``ac2g`` flows, and the GPU kernels they launch
(GEMMs, attention, norms, fused MoE, NCCL AllReduce), with ``distributedInfo`` and
``baseTimeNanoseconds`` in the trailer.

    python -m benchmarks.trace_gen OUT.json[.gz] --size-mb 1024 [--rank 0]
"""

from __future__ import annotations

import argparse
import gzip
import io
import random
from pathlib import Path

KERNELS = (
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 38.0),
    (
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
        "false, cutlass::bfloat16_t>, true, false>(flash::Flash_fwd_params)",
        22.0,
    ),  # fmt: skip
    (
        "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
        "c10::BFloat16 const*, float, int, int)",
        4.0,
    ),  # fmt: skip
    ("fused_moe_kernel", 61.0),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::"
        "TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(c10::BFloat16)#1}, "
        "std::array<char*, 2ul> >(int, at::native::silu_kernel, std::array<char*, 2ul>)",
        3.0,
    ),  # fmt: skip
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 78.0),
)
# with_stack (vLLM's default) records a Python frame stack around every op: 12 frames per
# kernel here; the real vLLM fixtures hold 1-40 (49-88% of their events).
PY_FRAMES = (
    "vllm/v1/worker/gpu_worker.py(458): execute_model",
    "torch/utils/_contextlib.py(120): decorate_context",
    "vllm/v1/worker/gpu_model_runner.py(1803): execute_model",
    "vllm/v1/worker/gpu_model_runner.py(1620): _model_forward",
    "torch/nn/modules/module.py(1773): _wrapped_call_impl",
    "torch/nn/modules/module.py(1784): _call_impl",
    "vllm/model_executor/models/deepseek_v2.py(912): forward",
    "torch/nn/modules/module.py(1773): _wrapped_call_impl",
    "torch/nn/modules/module.py(1784): _call_impl",
    "vllm/model_executor/layers/linear.py(1297): forward",
    "vllm/model_executor/layers/quantization/utils/w8a8_utils.py(412): apply",
    "<built-in method apply of PyCapsule object at 0x7f1c2c4e1b30>",
)
# the nested CPU ops around one launch: module op -> aten op -> the op that launches
CPU_OPS = ("aten::linear", "aten::addmm", "aten::mm")


class _Writer:
    def __init__(self, out: io.TextIOBase, rank: int) -> None:
        self.out, self.rank = out, rank
        self.ts = 1_760_000_000_000_000.0 / 1000  # us, like recent traces (relative to base)
        self.gpu_ts = self.ts
        self.corr = 1000
        self.ext = 1
        self.ev_idx = 0
        self.first = True
        self.rng = random.Random(rank)

    def emit(self, text: str) -> None:
        self.out.write(text if self.first else ",\n" + text)
        self.first = False

    def x(self, cat: str, name: str, pid: int, tid: int, ts: float, dur: float, args: str) -> None:
        self.emit(
            f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
            f'    "ts": {ts:.3f}, "dur": {dur:.3f},\n    "args": {{\n      {args}\n    }}\n  }}'
        )

    def step(self, n: int, batch: int, layers: int) -> None:
        pid, tid = 4242 + self.rank, 4242 + self.rank
        start = self.ts
        gpu_start = max(self.gpu_ts, start + 5.0)
        for _layer in range(layers):
            for kname, kdur in KERNELS:
                self.ts += 2.0
                for depth, frame in enumerate(PY_FRAMES):  # with_stack: most of the events
                    self.x("python_function", frame, pid, tid, self.ts + depth * 0.2, 9.0 - depth,
                           f'"Python parent id": {self.ev_idx}, "Python id": {self.ev_idx + 1}, '
                           f'"Ev Idx": {self.ev_idx}')  # fmt: skip
                    self.ev_idx += 1
                for depth, op in enumerate(CPU_OPS):
                    self.ext += 1
                    self.ev_idx += 1
                    self.x("cpu_op", op, pid, tid, self.ts + 1.0 + depth * 0.3, 6.0 - depth,
                           f'"External id": {self.ext},"Record function id": 0, "Ev Idx": '
                           f'{self.ev_idx}, "Input Dims": [[{batch}, 7168], [7168, 2048], []], '
                           f'"Input type": ["c10::BFloat16", "c10::BFloat16", ""], '
                           f'"Input Strides": [[7168, 1], [1, 7168], []], '
                           f'"Concrete Inputs": ["", "", ""]')  # fmt: skip
                self.corr += 1
                self.x("cuda_runtime", "cudaLaunchKernel", pid, tid, self.ts + 3.0, 4.0,
                       f'"External id": {self.ext}, "cbid": 211, "correlation": {self.corr}')  # fmt: skip
                self.gpu_ts = max(self.gpu_ts, self.ts + 5.0) + 1.0
                dur = kdur * (0.9 + 0.2 * self.rng.random())
                extra = ""
                if kname.startswith("nccl"):
                    extra = (', "Collective name": "allreduce", "In msg nelems": 7168, '
                             '"Out msg nelems": 7168, "Group size": 8, "dtype": "BFloat16"')  # fmt: skip
                self.x("kernel", kname, 0, 7, self.gpu_ts, dur,
                       f'"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": '
                       f'{self.corr}, "registers per thread": 128, "shared memory": 0, '
                       f'"blocks per SM": 1.0, "warps per SM": 4.0, "grid": [132, 1, 1], '
                       f'"block": [128, 1, 1], "est. achieved occupancy %": 12{extra}')  # fmt: skip
                self.emit(f'  {{\n    "ph": "s", "id": {self.corr}, "pid": {pid}, "tid": {tid}, '
                          f'"ts": {self.ts + 3.0:.3f},\n    "cat": "ac2g", "name": "ac2g"\n  }}')  # fmt: skip
                self.emit(f'  {{\n    "ph": "f", "id": {self.corr}, "pid": 0, "tid": 7, '
                          f'"ts": {self.gpu_ts:.3f},\n    "cat": "ac2g", "name": "ac2g", '
                          f'"bp": "e"\n  }}')  # fmt: skip
                self.gpu_ts += dur
                self.ts += 10.0
        # Kineto writes annotations whenever they close; order in the file does not matter.
        name = f"execute_context_0(0)_generation_{batch}({batch})"
        self.x("user_annotation", name, pid, tid, start, self.ts - start, f'"External id": {n}')
        self.x("gpu_user_annotation", name, 0, 7, gpu_start, self.gpu_ts - gpu_start,
               f'"External id": {n}')  # fmt: skip
        self.ts = max(self.ts, self.gpu_ts) + 50.0


def generate(path: Path, size_mb: float, rank: int = 0, layers: int = 61, batch: int = 32) -> int:
    """Write the trace; return the number of steps. ``.gz`` suffix compresses it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target = int(size_mb * 1024 * 1024)
    raw = path.open("wb")
    stream = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if path.suffix == ".gz" else raw
    counter = _Counting(stream)
    out = io.TextIOWrapper(counter, encoding="utf-8", write_through=False)
    out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, '
              '"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045379072,\n'
              '      "computeMajor": 9, "computeMinor": 0, "numSms": 132\n    }\n  ],\n'
              '  "traceEvents": [\n')  # fmt: skip
    w = _Writer(out, rank)
    steps = 0
    while counter.n < target:
        w.step(steps, batch, layers)
        steps += 1
        out.flush()
    out.write(
        '\n  ],\n  "distributedInfo": {"backend": "nccl", "rank": '
        + str(rank)
        + ', "world_size": 8, "pg_count": 1, "nccl_version": "2.27.3"},\n  "traceName": "'
        + path.name
        + '",\n  "displayTimeUnit": "ms",\n'
        + '  "baseTimeNanoseconds": 1760000000000000000\n}\n'
    )
    out.flush()
    out.detach()
    if stream is not raw:
        stream.close()
    raw.close()
    return steps


class _Counting(io.RawIOBase):
    """Counts uncompressed bytes written, so the size target is the JSON size."""

    def __init__(self, inner: io.IOBase) -> None:
        self.inner, self.n = inner, 0

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.n += len(b)
        self.inner.write(b)
        return len(b)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--size-mb", type=float, default=64)
    p.add_argument("--rank", type=int, default=0)
    args = p.parse_args()
    steps = generate(args.out, args.size_mb, args.rank)
    print(f"{args.out}: {steps} steps")


if __name__ == "__main__":
    main()
