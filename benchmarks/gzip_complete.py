"""Cost of deciding that a gzipped rank trace is whole (vllm-profile / sglang-profile wait).

PyTorch and SGLang gzip a trace straight into its final ``*.json.gz`` name, so the waiter
decompresses a stable file to its end once (collectors/serving/traces.py ``complete``). This
times that check against what a user would run by hand, ``gzip -t FILE``, on generated
vLLM-shaped traces (benchmarks/trace_gen.py), gzipped at level 6 as torch's ``gzip.open``.
Run: ``python -m benchmarks.gzip_complete --sizes 64,256 --repeat 3``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from benchmarks.trace_gen import generate
from collectors.serving.traces import complete

OUT = Path(__file__).with_name("out")


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64,256", help="JSON sizes in MB")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    OUT.mkdir(exist_ok=True)
    rows = []
    for mb in (int(x) for x in args.sizes.split(",")):
        gz = OUT / f"gz-{mb}.pt.trace.json.gz"
        if not gz.exists():
            generate(gz, mb)  # level-6 gzip stream, as torch's gzip.open writes
        assert complete(gz)
        ours = _median(lambda g=gz: complete(g), args.repeat)
        gzip_t = _median(lambda g=gz: subprocess.run(["gzip", "-t", str(g)], check=True),
                         args.repeat)  # fmt: skip
        rows.append({"json_mb": mb, "gz_mb": round(gz.stat().st_size / 1e6, 1),
                     "complete_s": round(ours, 3), "gzip_t_s": round(gzip_t, 3)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    (OUT / "gzip_complete.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
