"""``expert-load FILE... --model M`` or ``expert-load --url URL``: measured routing skew.

Reads SGLang's expert distribution recorder outputs (every mode; collectors/expert_load/
sglang_files.py), or records them from a running server (record.py), checks them against
the model's shape, and commits one run: the layers x logical-expert counts, the model, and
the busiest EP rank's tokens against the mean rank's for every EP size that divides the
expert count, with experts placed contiguously and balanced (planner.api.expert_load),
and under the recorded placement map when there is one.

vLLM exposes no per-expert counts to import: its EPLB keeps them in GPU memory
(``expert_load_window``) and reports balancedness only (docs/expert-load.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from collectors.core import inputs
from collectors.core.context import Context
from collectors.core.errors import InputError
from collectors.core.hosts import imported_env
from collectors.expert_load import model as models_
from collectors.expert_load import record, sglang_files
from collectors.expert_load.tables import figures, tables
from store.spool.bundle import Bundle, content_run_id, new_run_id

SPREAD_WARN = 0.05  # per-layer totals further apart than this are said loudly


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="SGLang expert distribution dumps (.pt, any recorder mode; several "
                   "per_pass / per_token rank files are one recording) or the JSON "
                   "{\"logical_count\": [layers][experts]} form")  # fmt: skip
    p.add_argument("--model", help="preset (deepseek-v3, ...), config.json, or served model id "
                   "(default with --url: the server's)")  # fmt: skip
    p.add_argument("--placement", type=Path, metavar="FILE",
                   help="a placement map (JSON or .pt with physical_to_logical_map, the form "
                   "SGLang's --init-expert-location reads) to figure the busiest rank under")  # fmt: skip
    p.add_argument("--ep", type=int, metavar="N",
                   help="the EP size the placement map (--placement, or the one per_pass / "
                   "per_token dumps carry) spreads its slots over")  # fmt: skip
    record.add_arguments(p)


def run(args: argparse.Namespace, ctx: Context) -> int:
    if bool(args.files) == bool(args.url):
        raise InputError("give recorder FILEs or --url of a running SGLang server (one of them)")
    if args.url:
        from collectors.core.lock import LockHeld, measurement_lock

        try:
            with measurement_lock(ctx.verb, args.wait, args.wait_timeout):
                return _recorded(args, ctx)
        except LockHeld as exc:
            ctx.log.warning(f"skipped: {exc}; use --wait to queue behind it")
            return 0
    if not args.model:
        raise InputError("--model is required with FILEs: a preset (deepseek-v3, ...), a "
                         "config.json, or a served model id")  # fmt: skip
    model = models_.resolve(args.model)
    rec = sglang_files.read([Path(f) for f in args.files])
    placement = _placement(args, rec)
    check(rec, model, ctx)
    digest = json.dumps([model.model_id, rec.mode, np.round(rec.counts, 6).tolist(),
                         None if placement is None else placement[1].tolist()])  # fmt: skip
    run_id = content_run_id("expert-load", digest)
    # Dumps name no host (SGLang's recorder writes counts and maps only): --host or unknown.
    return _submit(ctx, run_id, ctx.import_host(), imported_env(), rec, model, placement, {})


def _recorded(args: argparse.Namespace, ctx: Context) -> int:
    base = record.check_args(args)
    from collectors.serving.sglang import server

    facts = server.facts(base)
    if not facts.model and not args.model:
        raise InputError(f"{base} names no model; pass --model")
    model = models_.resolve(args.model or facts.model, user_named=bool(args.model))
    out = record.record(args, base, facts, ctx.log)
    placement = _placement(args, out.recording)
    check(out.recording, model, ctx)
    host, env = ctx.server_run(out.base)
    if out.facts.version:
        env["sglang"] = out.facts.version
    extra = {"url": out.base, "sglang_version": out.facts.version,
             "recorder_mode": out.mode or out.recording.mode}  # fmt: skip
    return _submit(ctx, new_run_id("expert-load"), host, env, out.recording, model, placement,
                   extra, {"load": out.load_stats})  # fmt: skip


def _placement(args: argparse.Namespace,
               rec: sglang_files.Recording) -> tuple[int, np.ndarray] | None:  # fmt: skip
    """(EP size, physical_to_logical_map) to figure the busiest rank under, if any."""
    if args.ep is not None and args.ep < 1:
        raise InputError("--ep: must be at least 1")
    mapping = rec.physical_to_logical
    if args.placement is not None:
        mapping = _read_map(args.placement)
        if args.ep is None:
            raise InputError(f"--placement {args.placement}: give --ep, the EP size it spreads "
                             "its slots over")  # fmt: skip
    if mapping is None:
        if args.ep is not None:
            raise InputError("--ep: no placement map (--placement, or per_pass dump files) to "
                             "apply it to")  # fmt: skip
        return None
    if args.ep is None:  # the ranks in the files are the world, not necessarily the EP group
        return None
    ep = args.ep
    if ep < 2 or mapping.shape[1] % ep:
        raise InputError(f"--ep {ep}: the map's {mapping.shape[1]} slots do not split over "
                         f"{ep} ranks")  # fmt: skip
    if mapping.shape[0] != rec.counts.shape[0] or mapping.max() >= rec.counts.shape[1]:
        raise InputError(f"placement map {list(mapping.shape)} does not fit the counts' "
                         f"{rec.counts.shape[0]} layers x {rec.counts.shape[1]} experts")  # fmt: skip
    return ep, mapping


def _read_map(path: Path) -> np.ndarray:
    if path.suffix == ".pt":
        data: Any = sglang_files.torch_load(path)
    else:
        text = inputs.read_bytes(path, sglang_files.MAX_JSON_BYTES, "a placement map")
        data = inputs.parse_json(text, path)
    if not isinstance(data, dict) or "physical_to_logical_map" not in data:
        raise InputError(f"--placement {path}: no physical_to_logical_map in it")
    arr = sglang_files._array(path, data["physical_to_logical_map"], "physical_to_logical_map",
                              integer=True)  # fmt: skip
    if arr.ndim != 2 or 0 in arr.shape:
        raise InputError(f"--placement {path}: physical_to_logical_map must be layers x slots "
                         "of expert ids")  # fmt: skip
    sglang_files.check_map(path, arr, "physical_to_logical_map")
    return arr


def check(rec: sglang_files.Recording, model: models_.Model, ctx: Context) -> None:
    """The counts must be the model's shape; dense layers empty; totals close (said if not)."""
    spec, where = model.spec, " + ".join(Path(f).name for f in rec.files)
    layers, experts = rec.counts.shape
    if not spec.num_experts:
        raise InputError(f"--model {model.model_id}: a dense model has no routed experts")
    if (layers, experts) != (spec.num_layers, spec.num_experts):
        raise InputError(f"{where}: {layers} layers x {experts} experts, but {spec.name} has "
                         f"{spec.num_layers} layers x {spec.num_experts} routed experts: a "
                         "recording of another model?")  # fmt: skip
    totals = rec.counts.sum(axis=1)
    busy_dense = [i for i in range(spec.num_dense_layers) if totals[i] > 0]
    if busy_dense:
        raise InputError(f"{where}: layer {busy_dense[0]} is a dense layer of {spec.name} but "
                         f"routed {totals[busy_dense[0]]:.0f} tokens: a recording of another "
                         "model?")  # fmt: skip
    routed = totals[list(model.moe_layers)]
    if not (routed > 0).any():
        raise InputError(f"{where}: no layer routed a token (was load sent while recording?)")
    idle = [i for i in model.moe_layers if totals[i] == 0]
    if idle:
        ctx.log.warning(f"{where}: {len(idle)} MoE layer(s) routed no token (first: layer "
                        f"{idle[0]}); they are left out of the figures")  # fmt: skip
    busy = routed[routed > 0]
    spread = float((busy.max() - busy.min()) / busy.max())
    if spread > SPREAD_WARN:
        ctx.log.warning(f"{where}: per-layer totals differ by up to {spread:.1%} (tokens "
                        "dropped or layers recorded over different passes?); imported as "
                        "they are")  # fmt: skip
    elif spread > 0:
        ctx.log.info(f"{where}: per-layer totals differ by up to {spread:.3%}; accepted (each "
                     "layer's shares are its own)")  # fmt: skip


def _submit(ctx: Context, run_id: str, host: str, env: dict, rec: sglang_files.Recording,
            model: models_.Model, placement: tuple[int, np.ndarray] | None,
            extra: dict[str, Any], more: dict[str, Any] | None = None) -> int:  # fmt: skip
    if placement is None and rec.physical_to_logical is not None:
        ctx.log.info(f"the dump carries the server's placement map ({rec.physical_to_logical.shape[1]}"
                     " slots): pass --ep N, the server's EP size, to figure the busiest rank "
                     "under it too")  # fmt: skip
    figs = figures(rec, model, placement)
    message = (f"{rec.mode} recording of {model.model_id}: worst layer's hottest expert "
               f"{figs.worst_layer:.1f}x the mean")  # fmt: skip
    record_ = ctx.run_record(run_id, env=env, host=host, message=message)
    bundle = Bundle(record_, tables(rec, model, figs, extra))
    return ctx.submit(bundle, {**figs.summary(), **(more or {})})
