"""Real torch.profiler traces of real CPU work with SGLang-style step ranges, one per rank.

Each forward step is a ``user_annotation`` named ``step[DECODE bs=4]`` (the SGLang step
range form collectors/trace/steps.py recognises). Written as ``.trace.json.gz`` the way
SGLang's scheduler exports them.
Run: ``python -m tests.sglang.make_traces OUT_DIR RANKS``.
"""

from __future__ import annotations

import sys

from tests.vllm import make_traces


def main(out_dir: str, ranks: int) -> None:
    make_traces.main(out_dir, ranks, step="step[DECODE bs=4]", file_name="made-TP-{rank}.trace.json.gz")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
