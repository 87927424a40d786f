"""``vllm-bench``: serving benchmarks per concurrency, with the layout they ran under.

Two modes: ``--results FILE|DIR ...`` imports existing ``vllm bench serve --save-result``
JSON, or text logs holding the printed result blocks of any vLLM era (no measurement lock:
it only reads files); ``--url URL --concurrency 1,4,16`` runs
``vllm bench serve`` once per concurrency (vLLM must be installed here) under the host-wide
measurement lock, then imports what it saved.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from pathlib import Path

from collectors.core.context import Context
from collectors.core.errors import InputError, MeasurementError
from collectors.serving import bench_import, model_config
from collectors.serving.vllm import layout as layout_mod
from collectors.serving.vllm.profile import server_models

ENGINE = bench_import.Engine("vllm", "vllm-bench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("what to store (one of)")
    src.add_argument("--results", nargs="+", type=Path, metavar="PATH",
                     help="import saved result JSON files, logs with printed result blocks, or folders of them")  # fmt: skip
    src.add_argument("--url", help="run `vllm bench serve` against this server")
    run = bench_import.add_sweep_arguments(parser)
    run.add_argument("--model", help="served model name (default: the server's first model); "
                     "with --results: the model of results that name none")  # fmt: skip
    run.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY"),
                     help="the server's --api-key (default: $VLLM_API_KEY)")  # fmt: skip
    run.add_argument("--vllm-bin", default="vllm", help="the vllm executable (default: vllm)")
    run.add_argument("--bench-args", default="",
                     help="extra arguments for `vllm bench serve`, one quoted string")  # fmt: skip
    model_config.add_model_dir_argument(parser)
    lay = parser.add_argument_group("layout the server ran with")
    lay.add_argument("--server-args",
                     help="the `vllm serve` command line, e.g. \"-tp 8 --enable-expert-parallel\"")  # fmt: skip
    lay.add_argument("--vllm-version", help="server vLLM version (default: asked via /version)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return bench_import.run_verb(args, ctx, ENGINE, layout_mod.from_server_args, args.vllm_version, _sweep)


def build_command(args: argparse.Namespace, base: str, card: dict, concurrency: int,
                  result_dir: Path, layout: layout_mod.Layout | None) -> list[str]:  # fmt: skip
    """The `vllm bench serve` command for one concurrency (flags as in vllm/benchmarks/serve.py).

    ``--model`` is the checkpoint (the tokenizer comes from it): the card's ``root``; the
    name the server answers to goes in ``--served-model-name`` when it differs.
    """
    num = args.num_prompts or max(4 * concurrency, 16)
    root = card.get("root") or card["id"]
    names = ["--served-model-name", card["id"]] if root != card["id"] else []
    cmd = [args.vllm_bin, "bench", "serve", "--backend", "vllm", "--base-url", base,
           "--model", root, *names, "--dataset-name", "random",
           "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
           "--num-prompts", str(num), "--max-concurrency", str(concurrency),
           "--request-rate", "inf", "--ignore-eos", "--disable-tqdm",
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--result-dir", str(result_dir),
           "--result-filename", f"c{concurrency}.json"]  # fmt: skip
    if layout and layout.known:
        cmd += ["--metadata", f"tp={layout.tp}", f"pp={layout.pp or 1}", f"dp={layout.dp or 1}",
                f"ep={int(bool(layout.ep))}"]  # fmt: skip
    return cmd + shlex.split(args.bench_args or "")


def _sweep(args: argparse.Namespace, ctx: Context, layout: layout_mod.Layout | None) -> int:
    base, levels = bench_import.parse_sweep(args.url, args.concurrency)
    if shutil.which(args.vllm_bin) is None:
        raise InputError(
            f"{args.vllm_bin}: not found, so `vllm bench serve` cannot run here; install vLLM "
            "(pip install vllm) or import saved results with --results FILE..."
        )
    api_key, args.api_key = args.api_key, None  # a secret: never recorded with the run's args
    served_version, models = server_models(base, api_key)
    version = args.vllm_version or served_version
    card = next((m for m in models if m.get("id") == args.model), None) if args.model else None
    card = card or ({"id": args.model} if args.model else (models[0] if models else None))
    if not card:
        raise MeasurementError(f"{base}/v1/models lists no model")
    env = dict(os.environ, **({"OPENAI_API_KEY": api_key} if api_key else {}))
    # --result-dir/--result-filename: the saved file lands at <dir>/c{c}.json.
    return bench_import.run_sweep(
        ctx, ENGINE, "vllm bench serve", levels,
        lambda c, out: build_command(args, base, card, c, out.parent, layout), "c{c}.json", env,
        layout, version,
    )  # fmt: skip
