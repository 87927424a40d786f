"""Import benchmark results for any engine: files -> serving_bench rows -> one run.

The run id is the content of the files (plus the layout given), so importing the same
results twice is a no-op; ``--server-args`` beats per-result ``--metadata`` layouts.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from collectors.core import inputs
from collectors.core.context import Context
from collectors.core.errors import EXIT_OK, InputError, MeasurementError
from collectors.core.hosts import imported_env
from collectors.core.lock import LockHeld, measurement_lock
from collectors.serving import client, result_files, results
from collectors.serving.layout import Layout, parse_server_args, redact
from store.spool.bundle import Bundle, content_run_id, new_run_id


@dataclass(frozen=True)
class Engine:
    """What differs per engine for bench import: its name, verb, and how its result files of
    every era name their keys."""

    name: str  # vllm | sglang (serving_bench.engine; the run's env entry for its version)
    verb: str  # vllm-bench | sglang-bench
    normalize: Callable[[dict], dict] | None = None  # the engine's keys -> vLLM's
    layout_of: Callable[[dict], Layout | None] | None = None  # a layout the result records
    # a result with what its server reported about itself where the result has none
    with_server: Callable[[dict, dict], dict] | None = None


def add_sweep_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The bench verbs' sweep flags, shared by every engine; the group, for an engine to
    add its own."""
    run = parser.add_argument_group("sweep (with --url)")
    run.add_argument("--concurrency", default="1,2,4,8,16,32",
                     help="comma-separated --max-concurrency values (default 1,2,4,8,16,32)")  # fmt: skip
    run.add_argument("--num-prompts", type=int, default=None,
                     help="requests per concurrency (default max(4 x c, 16))")  # fmt: skip
    run.add_argument("--input-len", type=int, default=1024, help="prompt tokens (default 1024)")
    run.add_argument("--output-len", type=int, default=256, help="output tokens (default 256)")
    run.add_argument("--wait", action="store_true",
                     help="wait for another measurement to finish instead of skipping")  # fmt: skip
    run.add_argument("--wait-timeout", type=float, default=None, metavar="S",
                     help="give up waiting after S seconds (exit 0, skipped)")  # fmt: skip
    return run


def run_verb(args: argparse.Namespace, ctx: Context, engine: Engine,
             parse_layout: Callable[[str], Layout], version: str | None,
             sweep: Callable[[argparse.Namespace, Context, Layout | None], int]) -> int:  # fmt: skip
    """Every engine's bench verb: import ``--results`` files, or run ``sweep`` against
    ``--url`` under the host-wide measurement lock (skipped with a line when it is held)."""
    if bool(args.results) == bool(args.url):
        raise InputError(f"{engine.verb}: give either --results PATH... (import) or --url URL "
                         "(run)")  # fmt: skip
    layout = parse_server_args(parse_layout, args.server_args)
    args.server_args = redact(args.server_args)  # stored with the run
    if args.results:
        return import_files(ctx, engine, result_files.result_files(args.results), layout,
                            version, args.model, args.model_dir)  # fmt: skip
    try:
        with measurement_lock(engine.verb, args.wait, args.wait_timeout):
            return sweep(args, ctx, layout)
    except LockHeld as exc:
        ctx.log.warning(f"skipped: {exc}; use --wait to queue behind it")
        return EXIT_OK


class Rows:
    """serving_bench rows gathered in column batches (a JSONL of 200,000 results is a few
    hundred MB as dicts, a few tens as columns), and what the summary says of them."""

    BATCH = 4096

    def __init__(self) -> None:
        self.batches: list = []  # pyarrow Tables
        self.pending: list[dict] = []
        self.count = self.unknown = self.no_model = 0
        self.concurrency: set[int] = set()
        self.models: set[str] = set()
        self.layouts: set[str] = set()
        self.formats: set[str] = set()
        self.notes: list[str] = []  # said once the rows are in

    def add(self, row: dict) -> None:
        self.count += 1
        self.unknown += row["layout"] is None
        self.no_model += not row["model_id"]
        if row["concurrency"] is not None:
            self.concurrency.add(row["concurrency"])
        if row["model_id"]:
            self.models.add(row["model_id"])
        if row["layout"]:
            self.layouts.add(row["layout"])
        self.formats.add(row["result_format"])
        self.pending.append(row)
        if len(self.pending) >= self.BATCH:
            self._batch()

    def _batch(self) -> None:
        import pyarrow as pa

        if self.pending:
            self.batches.append(pa.Table.from_pylist(self.pending))
            self.pending = []

    def __iter__(self):  # noqa: ANN204 - the rows as dicts, in order
        for batch in self.batches:
            yield from batch.to_pylist()
        yield from self.pending

    def table(self):  # noqa: ANN201 - a pyarrow Table, or the rows when few
        if not self.batches:
            return self.pending
        import pyarrow as pa

        self._batch()
        return pa.concat_tables(self.batches, promote_options="permissive")


def read_rows(files: list[Path], layout: Layout | None, version: str | None, engine: Engine,
              model: str | None, source: str | None = None,
              server: dict | None = None) -> Rows:  # fmt: skip
    """serving_bench rows of every result in ``files``; ``model`` for those that name none;
    ``server``: what the server said about itself (a sweep's), for results that do not say.
    The layout: ``layout`` (from --server-args), else the one the result records."""
    out = Rows()
    for f in files:
        for r in result_files.load_results(f, engine.normalize):
            if server and engine.with_server:
                r.obj = engine.with_server(r.obj, server)
            try:
                recorded = engine.layout_of(r.obj) if engine.layout_of else None
            except ValueError as exc:
                raise InputError(f"{r.where}: {exc}") from None
            lay = layout or recorded or results.layout_from_metadata(r.obj)
            name = source or (f.name if r.part is None else f"{f.name}#{r.part + 1}")
            row = results.to_row(r.obj, name, lay, version, engine.name, r.fmt, r.where,
                                 out.notes)  # fmt: skip
            row["model_id"] = row["model_id"] or model
            out.add(row)
    return out


def import_files(ctx: Context, engine: Engine, files: list[Path], layout: Layout | None,
                 version: str | None, model: str | None = None,
                 model_dir: str | None = None) -> int:  # fmt: skip
    """Commit the results in ``files`` as one content-addressed run; ``model`` names the
    model of results that do not (SGLang's older JSONL, logs without a ``Namespace`` line).
    A file whose bytes another file given already holds is read once."""
    seen: dict[bytes, Path] = {}
    for f in files:
        if (d := result_files.digest(f)) in seen:
            ctx.log.info(f"{f}: the same content as {seen[d]}; read once")
        else:
            seen[d] = f
    files = list(seen.values())
    found = read_rows(files, layout, version, engine, model)
    # The model given is part of what was imported: same files + another model = another run.
    digest = hashlib.sha256((model or "").encode())
    for f in sorted(files, key=lambda p: p.name):
        with inputs.open_input(f, what=result_files.WHAT) as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    if layout:
        digest.update(repr(sorted(layout.as_dict().items())).encode())
    run_id = content_run_id(engine.verb, digest.digest())
    what = f"imported {found.count} result(s) from {len(files)} file(s)"
    return submit(ctx, engine, run_id, found, what, version, model_dir)


def submit(ctx: Context, engine: Engine, run_id: str, found: Rows, what: str,
           version: str | None, model_dir: str | None = None,
           url: str | None = None) -> int:  # fmt: skip
    """Commit ``found`` as one run: of the server at ``url`` for a sweep; else of files
    measured elsewhere, which name no host (no result format of either engine records one),
    so ``--host`` or UNKNOWN_HOST, this machine kept as ``imported_on``."""
    if url is not None:
        host, env = ctx.server_run(url)
    else:
        host, env = ctx.import_host(), imported_env()
    if version:
        env[engine.name] = version  # the server's version is what the results describe
    unknown, no_model = found.unknown, found.no_model
    problems = [f"{unknown} result(s) without a known layout; pass --server-args"] if unknown else []
    if no_model:  # the Serving page groups by model: these would not show
        problems.append(f"{no_model} result(s) name no model; pass --model")
    message = "; ".join(problems) or None
    record = ctx.run_record(run_id, env=env, host=host, message=message)
    conc, models = sorted(found.concurrency), sorted(found.models)
    ctx.log.info(f"{what}: concurrency {conc}, models {models}")
    for note in found.notes:
        ctx.log.warning(note)
    if unknown:
        ctx.log.warning(message)
    summary = {"results": found.count, "concurrency": conc, "models": models,
               "layouts": sorted(found.layouts), "formats": sorted(found.formats),
               "engine": engine.name}  # fmt: skip
    tables: dict[str, object] = {"serving_bench": found.table()}
    tables.update(_model_configs(models, model_dir))
    return ctx.submit(Bundle(record, tables), summary)


def _model_configs(models: list[str], model_dir: str | None) -> dict[str, list[dict]]:
    """The config of each benchmarked model found in the hub cache by its name, or in the
    folder the user named (``--model-dir``: the one model of the results). A model name
    from a results file is never opened as a path."""
    from collectors.serving.model_config import TABLE, model_config_tables

    if model_dir and len(models) > 1:
        raise InputError(f"--model-dir {model_dir}: the results name {len(models)} models "
                         f"({', '.join(models[:3])}); import each model's results on its own")  # fmt: skip
    rows: list[dict] = []
    for model_id in models or ([None] if model_dir else []):
        rows += model_config_tables(model_id, model_dir).get(TABLE, [])
    return {TABLE: rows} if rows else {}


def parse_sweep(url: str, concurrency: str) -> tuple[str, list[int]]:
    """(base URL, sorted concurrency levels) of a sweep's flags; InputError when unusable."""
    try:
        base = client.normalize_base(url)
        levels = sorted({int(x) for x in concurrency.split(",") if x.strip()})
    except ValueError as exc:
        raise InputError(f"--url/--concurrency: {exc}") from None
    if not levels or min(levels) < 1:
        raise InputError("--concurrency: give positive integers, e.g. 1,4,16")
    return base, levels


def run_sweep(ctx: Context, engine: Engine, tool: str, levels: list[int],
              command: Callable[[int, Path], list[str]], out_name: str, env: dict[str, str],
              layout: Layout | None, version: str | None, model: str | None = None,
              server: dict | None = None) -> int:  # fmt: skip
    """Run the engine's benchmark tool once per concurrency (``command(c, out_path)``), read
    what each run saved (``server``: what the server reported, see read_rows), and commit
    them as one run."""
    with tempfile.TemporaryDirectory(prefix=f"stepscope-{engine.verb}-") as tmp:
        files = []
        for c in levels:
            out = Path(tmp) / out_name.format(c=c)
            cmd = command(c, out)
            ctx.log.info(f"concurrency {c}: {shlex.join(cmd)}")
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0 or not out.exists():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise MeasurementError(f"`{tool}` failed at concurrency {c} (exit "
                                       f"{proc.returncode}): {tail[0][:200]}")  # fmt: skip
            files.append(out)
        found = read_rows(files, layout, version, engine, model, source="sweep", server=server)
    return submit(ctx, engine, new_run_id(engine.verb), found,
                  f"ran {len(levels)} concurrency level(s)", version,
                  getattr(ctx.args, "model_dir", None), url=ctx.args.url)  # fmt: skip
