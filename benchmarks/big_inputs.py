"""Generate the large inputs of the import-memory benchmark (docs/benchmarks.md, Import
memory: each import is measured with ``/usr/bin/time -v``, its maximum resident set).

- ``trace``: a Kineto trace of N GPU kernel events (default 10 million), gzip, in the shape
  libkineto writes (``deviceProperties``, ``distributedInfo``, one ``"cat": "kernel"`` event
  per launch with stream, correlation and device args), decode steps of 60 kernels
  separated by idle gaps;
- ``jsonl``: an ``sglang.bench_serving --output-file`` JSONL of N result lines (default
  200,000; ~1 KB each, as tests/sglang/fixtures.py writes them);
- ``pt``: a per_pass expert distribution recording (``_DetailAccumulator.dump`` of SGLang,
  tests/expert_load/recordings.py) of about SIZE GB: DeepSeek-V3's 61 x 288 physical slots
  per record, written from a memory-mapped array so the generator stays small itself.

    python -m benchmarks.big_inputs trace /tmp/big/trace.json.gz --events 10000000
    python -m benchmarks.big_inputs jsonl /tmp/big/results.jsonl --lines 200000
    python -m benchmarks.big_inputs pt /tmp/big/recorder_0.pt --gb 3

Write them outside the repository (they are never committed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

KERNELS = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
           "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>",
           "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, float, int, int)",
           "fused_moe_kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgs)")  # fmt: skip
PER_STEP = 60


def trace(out: Path, events: int) -> None:
    head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0,
                                                     "world_size": 1},
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                  "totalGlobalMem": 85_045_870_592}]}  # fmt: skip
    with gzip.open(out, "wt", compresslevel=1) as f:
        f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        ts, lines = 1_700_000_000_000_000.0, []
        for i in range(events):
            name = KERNELS[i % len(KERNELS)]
            dur = 4.0 + (i % 7)
            lines.append(f'  {{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, '
                         f'"tid": 7, "ts": {ts:.3f}, "dur": {dur:.3f}, "args": {{"device": 0, '
                         f'"stream": 7, "correlation": {i + 1}}}}}')  # fmt: skip
            ts += dur + 1.0 + (300.0 if i % PER_STEP == PER_STEP - 1 else 0.0)
            if len(lines) == 100_000:
                f.write(",\n".join(lines) + (",\n" if i + 1 < events else "\n"))
                lines = []
        if lines:
            f.write(",\n".join(lines) + "\n")
        f.write("]}\n")


def jsonl(out: Path, lines: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.sglang.fixtures import line

    with out.open("w") as f:
        for i in range(lines):
            obj = line(1 + i % 512, tpot=8.0 + (i % 97) / 10.0)
            obj["tag"] = f"night-{i // 512}"
            f.write(json.dumps(obj) + "\n")


def pt(out: Path, gb: float) -> None:
    import numpy as np
    import torch

    layers, slots = 61, 288  # DeepSeek-V3: 256 routed experts + 32 redundant slots
    per_record = layers * slots * 4  # int32
    records = max(int(gb * 1e9 // per_record), 1)
    backing = out.with_suffix(".counts")
    counts = np.memmap(backing, dtype=np.int32, mode="w+", shape=(records, layers, slots))
    rng = np.random.default_rng(0)
    block = rng.integers(0, 40, size=(64, layers, slots), dtype=np.int32)
    block[:, :3] = 0  # DeepSeek-V3's three dense layers route nothing
    for start in range(0, records, 64):
        n = min(64, records - start)
        counts[start : start + n] = block[:n]
    counts.flush()
    big = torch.from_numpy(np.memmap(backing, dtype=np.int32, mode="r+",
                                     shape=(records, layers, slots)))  # fmt: skip
    mapping = torch.tensor([list(range(256)) + list(range(32))] * layers)
    data = {"records": [{"forward_pass_id": i, "rank": 0, "gatherer_key": "primary",
                         "global_physical_count": big[i]} for i in range(records)],
            "last_physical_to_logical_map": mapping}  # fmt: skip
    torch.save(data, out)
    backing.unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=("trace", "jsonl", "pt"))
    p.add_argument("out", type=Path)
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--lines", type=int, default=200_000)
    p.add_argument("--gb", type=float, default=3.0)
    a = p.parse_args()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    {"trace": lambda: trace(a.out, a.events), "jsonl": lambda: jsonl(a.out, a.lines),
     "pt": lambda: pt(a.out, a.gb)}[a.kind]()  # fmt: skip
    print(f"{a.out}: {a.out.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
