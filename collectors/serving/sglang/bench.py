"""``sglang-bench``: SGLang ``bench_serving`` results per concurrency, with their layout.

``--results FILE|DIR ...`` imports ``python -m sglang.bench_serving --output-file`` JSONL
(one result object per line, appended per run; every era's keys since July 2024:
collectors/sglang/result_keys.py) and logs holding its printed blocks (shapes:
python/sglang/bench_serving.py, sgl-project/sglang 0033168f; read by collectors/serving).
``--url URL --concurrency 1,4,16`` runs ``python -m sglang.bench_serving`` once per
concurrency when SGLang is installed here, under the host-wide measurement lock.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import InputError, MeasurementError
from collectors.serving import bench_import, model_config
from collectors.serving.layout import Layout
from collectors.serving.sglang import layout as sgl_layout
from collectors.serving.sglang import result_keys, server

ENGINE = bench_import.Engine(
    "sglang", "sglang-bench", result_keys.normalize,
    layout_of=lambda obj: sgl_layout.from_server_info(result_keys.server_info_of(obj)),
    with_server=result_keys.fill_from_server,
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("what to store (one of)")
    src.add_argument("--results", nargs="+", type=Path, metavar="PATH",
                     help="import bench_serving --output-file JSONL, logs with its printed "
                     "result blocks, or folders of them")  # fmt: skip
    src.add_argument("--url", help="run `python -m sglang.bench_serving` against this server")
    run = bench_import.add_sweep_arguments(parser)
    run.add_argument("--python", default=sys.executable,
                     help="the Python that has sglang installed (default: this one)")  # fmt: skip
    run.add_argument("--bench-args", default="",
                     help="extra arguments for sglang.bench_serving, one quoted string")  # fmt: skip
    model_config.add_model_dir_argument(parser)
    lay = parser.add_argument_group("the server the results describe")
    lay.add_argument("--server-args",
                     help="the `python -m sglang.launch_server` command line, e.g. "
                     "\"--tp 8 --ep 8 --moe-a2a-backend deepep\"")  # fmt: skip
    lay.add_argument("--sglang-version", help="server SGLang version (default: /get_server_info)")
    lay.add_argument("--model", help="model id for results that do not name one (old JSONL)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return bench_import.run_verb(args, ctx, ENGINE, sgl_layout.from_server_args, args.sglang_version, _sweep)


def build_command(args: argparse.Namespace, base: str, model: str, concurrency: int,
                  out: Path) -> list[str]:  # fmt: skip
    """One ``sglang.bench_serving`` run (flags as in python/sglang/bench_serving.py)."""
    num = args.num_prompts or max(4 * concurrency, 16)
    cmd = [args.python, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", base,
           "--model", model, "--dataset-name", "random", "--random-input-len",
           str(args.input_len), "--random-output-len", str(args.output_len),
           "--random-range-ratio", "1.0", "--num-prompts", str(num), "--max-concurrency",
           str(concurrency), "--request-rate", "inf", "--output-file", str(out),
           "--disable-tqdm"]  # fmt: skip
    return cmd + shlex.split(args.bench_args or "")


def has_sglang(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('sglang') is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _sweep(args: argparse.Namespace, ctx: Context, layout: Layout | None) -> int:
    base, levels = bench_import.parse_sweep(args.url, args.concurrency)
    if not has_sglang(args.python):
        raise InputError(
            f"{args.python}: has no sglang, so `python -m sglang.bench_serving` cannot run here; "
            "install it (pip install sglang) or pass --python, or import saved results with "
            "--results FILE..."
        )
    facts = server.facts(base)
    version = args.sglang_version or facts.version
    model = args.model or facts.model
    if not model:
        raise MeasurementError(f"{base}: /get_model_info and /v1/models name no model")
    return bench_import.run_sweep(
        ctx, ENGINE, "sglang.bench_serving", levels,
        lambda c, out: build_command(args, base, model, c, out), "c{c}.jsonl", dict(os.environ),
        layout or facts.layout, version, model, facts.info,
    )  # fmt: skip
