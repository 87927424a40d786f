"""Trace ingest benchmark: Stepscope vs Holistic Trace Analysis's loader vs `gzip -dc`.

    python -m benchmarks.trace_ingest [--sizes 64,256,1024] [--hta-max-mb 256] [--repeat 3]
    python -m benchmarks.trace_ingest --real FIXTURE.json.gz --copies 10,70 [--ranks 8]
        [--repeat 3]

The second form tiles a real trace in time (benchmarks/trace_tile.py) and compares against
HTA's load + kernel breakdown (``hta_breakdown``), the whole job a user would ask HTA for;
``--ranks N`` adds a run of N rank files (copies of the first tiled file, one folder).
``ours_one`` is the importer in one process, ``ours_two`` with its worker process
(shipped: the worker is used for large or several files when a core is idle).

Generates Kineto traces of the given sizes (MB of JSON) under benchmarks/out/, creates
the benchmark's own venv ``.venv-bench`` with HTA (holistictraceanalysis==0.5.0 and
pandas==2.2.3, never in the product's environment), then times every tool on every
file, each run in a fresh process, and prints medians: wall time, throughput (MB of JSON
per second), peak RSS.
HTA is limited to --hta-max-mb (it holds the whole file as Python objects, then a
DataFrame) and runs under a 14 GB address-space limit so it cannot exhaust a shared box.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
BENCH_VENV = ROOT / ".venv-bench"
# HTA 0.5.0 breaks on pandas 3 (int16 downcast in its correlation step): pin its era's pandas
HTA_PINS = ("holistictraceanalysis==0.5.0", "pandas==2.2.3")
MEASURE = ROOT / "benchmarks" / "trace_measure.py"
HTA_MEMORY_LIMIT = 14 << 30


def ensure_traces(sizes: list[int]) -> list[tuple[int, Path]]:
    from benchmarks.trace_gen import generate

    files = []
    for mb in sizes:
        gz = OUT / f"trace_{mb}mb.json.gz"
        if not gz.exists():
            print(f"generating {gz} ...", file=sys.stderr)
            generate(gz, mb)
        files.append((mb, gz))
        if mb <= 256:  # plain JSON too (no decompression in the way); 1 GB only as .gz
            plain = OUT / f"trace_{mb}mb.json"
            if not plain.exists():
                generate(plain, mb)
            files.append((mb, plain))
    return files


def ensure_tiled(src: Path, copies: list[int]) -> list[tuple[int, Path]]:
    from benchmarks.trace_tile import tile

    files = []
    for n in copies:
        out = OUT / f"{src.name.split('.')[0]}_x{n}.json.gz"
        if not out.exists():
            print(f"tiling {src.name} x{n} -> {out} ...", file=sys.stderr)
            tile(src, out, n)
        files.append((n, out))
    return files


def ensure_ranks(tiled: Path, ranks: int) -> tuple[int, Path]:
    """A folder of ``ranks`` copies of ``tiled`` named ..._rank<N>.json.gz (one run)."""
    folder = OUT / f"{tiled.name.split('.')[0]}_ranks{ranks}"
    folder.mkdir(exist_ok=True)
    for r in range(ranks):
        dst = folder / f"{tiled.name.split('.')[0]}_rank{r}.json.gz"
        if not dst.exists():
            os.link(tiled, dst)
    return ranks, folder


def ensure_hta() -> Path:
    python = BENCH_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    probe = subprocess.run(
        [str(python), "-c", "import hta, pandas; assert pandas.__version__ == '2.2.3'"],
        capture_output=True,
    )  # fmt: skip
    if probe.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *HTA_PINS], check=True)
    return python


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (HTA_MEMORY_LIMIT, HTA_MEMORY_LIMIT))


def measure(python: Path, tool: str, path: Path) -> dict | None:
    proc = subprocess.run(
        [str(python), str(MEASURE), tool, str(path)], capture_output=True, text=True,
        preexec_fn=_limit_memory if tool == "hta" else None, cwd=ROOT,
    )  # fmt: skip
    if proc.returncode != 0:
        print(f"{tool} {path.name} failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def json_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(json_bytes(f) for f in sorted(path.glob("*.json.gz")))
    if path.suffix != ".gz":
        return path.stat().st_size
    out = subprocess.run(f"gzip -dc '{path}' | wc -c", shell=True, capture_output=True, text=True)
    return int(out.stdout.strip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64,256,1024")
    p.add_argument("--hta-max-mb", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--real", type=Path, help="a real trace to tile in time instead")
    p.add_argument("--copies", default="10,70")
    p.add_argument("--ranks", type=int, default=0, help="with --real: also N rank files")
    p.add_argument("--skip-hta", action="store_true", help="ours and gzip only (HTA unchanged)")
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.real:
        files = ensure_tiled(args.real, [int(c) for c in args.copies.split(",")])
        if args.ranks:
            files.append(ensure_ranks(files[0][1], args.ranks))
        hta_tool, args.hta_max_mb = "hta_breakdown", 1 << 30
    else:
        files = ensure_traces([int(s) for s in args.sizes.split(",")])
        hta_tool = "hta"
    hta_python = None if args.skip_hta else ensure_hta()
    rows = []
    for mb, path in files:
        size = json_bytes(path)
        tools = [("ours", Path(sys.executable))]
        if args.real:
            tools = [("ours_one", Path(sys.executable)), ("ours_two", Path(sys.executable))]
        if mb <= args.hta_max_mb and not args.skip_hta:
            tools.append((hta_tool, hta_python))
        if path.suffix == ".gz" or path.is_dir():
            tools.append(("gzip", Path(sys.executable)))
        for tool, python in tools:
            runs = [r for _ in range(args.repeat) if (r := measure(python, tool, path))]
            if not runs:
                continue
            wall = statistics.median(r["wall_s"] for r in runs)
            load = os.getloadavg()[0]
            rows.append({
                "file": path.name, "json_mb": size / 1e6, "tool": tool, "runs": len(runs),
                "wall_s": wall, "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                # the main process alone (ours: its share; the rest ran in the worker)
                "cpu_main_s": statistics.median(r.get("cpu_main_s", r["cpu_s"]) for r in runs),
                "mb_per_s": size / 1e6 / wall,
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                "load_1m": load,
            })  # fmt: skip
            print(json.dumps(rows[-1]), file=sys.stderr)
    (OUT / ("trace_ingest_real.json" if args.real else "trace_ingest.json")).write_text(
        json.dumps({"machine": machine(), "rows": rows}, indent=1)
    )
    print(table(rows))


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())  # fmt: skip
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {len(os.sched_getaffinity(0))} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def table(rows: list[dict]) -> str:
    lines = ["| file | JSON MB | tool | median wall s | CPU s | main process CPU s | MB/s (wall) "
             "| peak RSS MB | load |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        main = r.get("cpu_main_s", r["cpu_s"])
        lines.append(f"| {r['file']} | {r['json_mb']:.0f} | {r['tool']} | {r['wall_s']:.2f} | "
                     f"{r['cpu_s']:.2f} | {main:.2f} | {r['mb_per_s']:.0f} | {r['peak_rss_mb']:.0f} | "
                     f"{r['load_1m']:.1f} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
