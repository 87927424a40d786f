"""Fallback trace maker: real torch.profiler traces of real CPU work, one file per rank.

Used only when the ``profile`` collector cannot produce rank traces here. Each step is a
``user_annotation`` named like vLLM's (``execute_context_0(0)_generation_4(4)``).
Run: ``python -m tests.vllm.make_traces OUT_DIR RANKS``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out_dir: str, ranks: int, step: str = "execute_context_0(0)_generation_4(4)",
         file_name: str = "rank{rank}.pt.trace.json.gz") -> None:
    """``ranks`` traces of 3 annotated steps; ``step`` and ``file_name`` follow the engine."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        a, b = torch.randn(128, 256), torch.randn(256, 256)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                with record_function(step):
                    for _ in range(4):
                        a = torch.tanh(a @ b) * 0.5
        prof.export_chrome_trace(str(out / file_name.format(rank=rank)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
