"""A real trace tiled in time: the benchmark input closest to a long real capture.

    python -m benchmarks.trace_tile SRC.json.gz OUT.json.gz --copies N

Every event of SRC is repeated N times, copy k shifted by k x (the trace's span + 1 ms);
correlation ids, flow ids and External ids are offset per copy so launches still pair
with their kernels. Events are written one per line with Kineto's ``", "``/``": "``
spacing; the keys around ``traceEvents`` are kept. The source stays a real trace's event
mix (Python frames, CPU ops, runtime calls, flows, kernels) rather than a synthetic one.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

_ID_ARGS = ("correlation", "External id", "Ev Idx", "Python id", "Python parent id")


def tile(src: Path, out: Path, copies: int) -> int:
    """Write ``out``; returns its size in bytes of JSON."""
    raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    doc = json.loads(raw)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    shift = (t1 - t0) + 1000.0
    big = 1 + max((int(e.get("args", {}).get(k, 0) or 0) for e in events
                   for k in _ID_ARGS if isinstance(e.get("args", {}).get(k), int)), default=0)  # fmt: skip
    big = max(big, 1 + max((e["id"] for e in events if isinstance(e.get("id"), int)), default=0))
    written = 0
    # gzip level 6: zlib's default, what torch's tensorboard_trace_handler(use_gzip) writes
    with (gzip.open(out, "wt", encoding="utf-8", compresslevel=6) if out.name.endswith(".gz")
          else open(out, "w", encoding="utf-8")) as f:  # fmt: skip
        head = json.dumps(doc)[1:-1]
        text = "{" + head + (", " if head else "") + '"traceEvents": [\n'
        f.write(text)
        written += len(text)
        first = True
        for k in range(copies):
            for e in events:
                if k and isinstance(e.get("ts"), (int, float)):
                    e = dict(e, ts=e["ts"] + k * shift)
                    if isinstance(e.get("id"), int):
                        e["id"] += k * big
                    args = e.get("args")
                    if isinstance(args, dict) and any(a in args for a in _ID_ARGS):
                        e["args"] = {a: (v + k * big if a in _ID_ARGS and isinstance(v, int)
                                         and v >= 0 else v) for a, v in args.items()}  # fmt: skip
                elif k:
                    continue  # metadata events once
                line = ("" if first else ",\n") + "  " + json.dumps(e)
                first = False
                f.write(line)
                written += len(line)
        f.write("\n]}\n")
    return written + 4


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--copies", type=int, default=8)
    a = p.parse_args()
    print(f"{a.out}: {tile(a.src, a.out, a.copies) / 1e6:.0f} MB of JSON")


if __name__ == "__main__":
    main()
