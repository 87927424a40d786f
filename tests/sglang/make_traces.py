"""Real torch.profiler traces of real CPU work with SGLang-style step ranges, one per rank.

Each forward step is a ``user_annotation`` named ``step[DECODE bs=4]`` (the SGLang step
range form collectors/trace/steps.py recognises). Written as ``.trace.json.gz`` the way
SGLang's scheduler exports them.
Run: ``python -m tests.sglang.make_traces OUT_DIR RANKS``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out_dir: str, ranks: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        a, b = torch.randn(128, 256), torch.randn(256, 256)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                with record_function("step[DECODE bs=4]"):
                    for _ in range(4):
                        a = torch.tanh(a @ b) * 0.5
        prof.export_chrome_trace(str(out / f"made-TP-{rank}.trace.json.gz"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
