"""The host's own measurements for calibrated mode (planner.cost.calibrate): a CSV the user
brings (``--measured FILE.csv``) or the store's runs of the model on the host
(``--calibrate-from-store``). Bad input is one line naming the file (and line) or the store.

CSV columns: ``tp, dp, ep, isl, osl, concurrency, tpot_ms`` and optionally ``ttft_ms`` and
``engine`` (vllm | sglang | trtllm; default vllm). ``ep`` is the expert-parallel size, 1 when
off (vLLM's ``--enable-expert-parallel`` spreads the experts over all tp x dp GPUs: ep = tp x
dp). One row per measured point: mean TPOT (ms) at a client concurrency.

A point physics rules out (a TPOT below one decode step's floor, a TTFT below its prompt's
prefill floor: planner.physical) is refused in one line naming the floor and the likely
unit slip; a stored run's such points are skipped with the same words.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
from pathlib import Path
from typing import Any

from planner.cost.calibrate import Measured, TraceStep
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.physical import refusal
from planner.specs import models
from planner.specs.engines import ENGINES
from planner.specs.hardware import HardwareSpec
from planner.specs.launch_flags import row_settings
from planner.specs.models import ModelSpec
from store import bounds

REQUIRED = ("tp", "dp", "ep", "isl", "osl", "concurrency", "tpot_ms")
OPTIONAL = ("ttft_ms", "engine")
MAX_BYTES = 1 << 20  # a measured sweep is a few dozen lines


def serve_layout(tp: int, dp: int, ep: int) -> ServeLayout:
    """tp x dp attention ranks with the experts over ``ep`` of them (1 = tensor-parallel MoE)."""
    n = tp * dp
    return ServeLayout(tp, dp, moe_tp=n // ep, moe_ep=ep) if ep > 1 else ServeLayout(tp, dp)


def read_measured(path: str | Path) -> list[Measured]:
    """The points of a ``--measured`` CSV; PlannerInputError (one line) otherwise."""
    p = Path(path)
    where = f"--measured {p}"
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise PlannerInputError(f"{where}: cannot read ({exc.strerror or type(exc).__name__})") \
            from None  # fmt: skip
    if len(raw) > MAX_BYTES:
        raise PlannerInputError(f"{where}: {len(raw)} bytes; a measured CSV is under 1 MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PlannerInputError(f"{where}: not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    for h in header:
        if h not in REQUIRED + OPTIONAL:
            close = difflib.get_close_matches(h, REQUIRED + OPTIONAL, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise PlannerInputError(f"{where}: unknown column {h!r}{hint}")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise PlannerInputError(f"{where}: missing column(s) {', '.join(missing)} (needs "
                                f"{', '.join(REQUIRED)}; optional {', '.join(OPTIONAL)})")  # fmt: skip
    out = []
    for n, row in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items() if k}
        if not any(row.values()):
            continue
        out.append(_point(row, f"{where} line {n}"))
    if not out:
        raise PlannerInputError(f"{where}: no measured rows under the header")
    return out


def _point(row: dict[str, str], where: str) -> Measured:
    ints = {c: _whole(row[c], c, where) for c in ("tp", "dp", "ep", "isl", "osl", "concurrency")}
    if ints["osl"] < 2:
        raise PlannerInputError(f"{where}: osl {ints['osl']} must be >= 2")
    tp, dp, ep = ints["tp"], ints["dp"], ints["ep"]
    if ep > 1 and (tp * dp) % ep:
        raise PlannerInputError(f"{where}: ep {ep} does not divide tp x dp = {tp * dp} GPUs")
    engine = (row.get("engine") or "vllm").lower()
    if engine not in ENGINES:
        raise PlannerInputError(f"{where}: engine {row['engine']!r}: one of {', '.join(ENGINES)}")
    ttft = _positive(row["ttft_ms"], "ttft_ms", where) if row.get("ttft_ms") else None
    return Measured(serve_layout(tp, dp, ep), ints["isl"], ints["osl"], ints["concurrency"],
                    _positive(row["tpot_ms"], "tpot_ms", where), engine, ttft, source=where)  # fmt: skip


def _whole(text: str, column: str, where: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value >= 1 and value == int(value)):
        raise PlannerInputError(f"{where}: {column} {text!r} is not a whole number >= 1")
    return int(value)


def _positive(text: str, column: str, where: str) -> float:
    """A measured time (ms) of the CSV: a number > 0 within what a machine can produce
    (store/bounds.py: the importers' bounds)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise PlannerInputError(f"{where}: {column} {text!r} is not a number > 0")
    if why := _BOUNDS[column].problem(value):
        raise PlannerInputError(f"{where}: {column} {why}")
    return value


_BOUNDS = {"tpot_ms": bounds.TOKEN_MS, "ttft_ms": bounds.LATENCY_MS}


# ---- the store --------------------------------------------------------------------------
def model_matches(model_id: str, model_arg: str, model: ModelSpec) -> bool:
    """Whether a served model id (``moonshotai/Kimi-K2.5``) is the planner's model: the preset
    it maps to, or the config's folder name."""
    if not isinstance(model_id, str) or not model_id:
        return False
    preset = model_arg if model_arg in models.MODEL_PRESETS else model.name
    if preset in models.MODEL_PRESETS:
        return models.preset_for_name(model_id) == preset
    return model_id.lower().rsplit("/", 1)[-1] == model.name.lower().rsplit("/", 1)[-1]


def _engine(value: Any) -> str:
    eng = str(value or "vllm").lower()
    return eng if eng in ENGINES else "vllm"


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def ruled_out(p: Measured, model: ModelSpec, hw: HardwareSpec, tokens_per_step: float = 1.0) -> str:
    """Why physics rules a measured point out on this host ("" when it does not)."""
    return refusal(model, hw, p.layout, p.work(), p.tpot_ms, p.ttft_ms, tokens_per_step)


def points_from_bench(rows: list[dict[str, Any]], launched: dict[str, str],
                      physics: tuple[ModelSpec, HardwareSpec] | None = None,
                      skipped: list[str] | None = None) -> list[Measured]:  # fmt: skip
    """Stored bench results (``v_serving_bench`` rows) as measured points, each predicted as its
    server was launched (token budget, SGLang's poll interval) with its own prompt count;
    rows without a known layout or a TPOT are left out, and with ``physics`` (the model and
    host) the points it rules out, said in ``skipped``."""
    out = []
    for r in rows:
        tpot, conc, tp = _num(r.get("mean_tpot_ms")), _num(r.get("concurrency")), _num(r.get("tp"))
        if tpot is None or conc is None or tp is None or not bounds.TOKEN_MS.ok(tpot):
            continue  # a row from before the importers checked bounds: not a point
        dp = int(_num(r.get("dp")) or 1)
        ep = int(tp) * dp if r.get("ep") is True or r.get("ep") == 1 else 1
        engine = _engine(r.get("engine"))
        isl = max(int(round(_num(r.get("input_len")) or 1)), 1)
        osl = max(int(round(_num(r.get("output_len")) or 2)), 2)
        sched = row_settings(engine, launched.get(r.get("run_id")), r.get("extra"))
        prompts = int(_num(r.get("num_prompts")) or 0)
        # the collectors' sweeps send fixed lengths (vllm bench serve's default, sglang's at
        # --random-range-ratio 1): the vllm client's draw
        w = Workload(isl, osl, engine, num_prompts=prompts, token_budget=sched.token_budget,
                     recv_interval=sched.recv_interval, bench="vllm")  # fmt: skip
        point = Measured(serve_layout(int(tp), dp, ep), isl, osl, int(conc), tpot, engine,
                         _num(r.get("mean_ttft_ms")), w,
                         f"bench run {r.get('run_id')} ({r.get('layout') or '?'}, c={int(conc)})")  # fmt: skip
        why = ruled_out(point, *physics, _num(r.get("spec_acceptance_length")) or 1.0) \
            if physics else ""  # fmt: skip
        if why:
            if skipped is not None:
                skipped.append(f"{point.source}: skipped: {why}")
            continue
        out.append(point)
    return out


def from_store(loc, host: str, model_arg: str, model: ModelSpec, hw: HardwareSpec,
               skipped: list[str]) -> tuple[list[Measured], list[TraceStep]]:  # fmt: skip
    """The host's stored serving sweeps and profiled traces of ``model``: one line when the
    store has none (or none physics allows on ``hw``; the points skipped go to ``skipped``)."""
    from store.errors import StoreError
    from store.queries import planner as qp
    from store.queries import serving as qs

    try:
        ids = qs.bench_models(loc, host)
        mine = [m for m in ids if model_matches(m, model_arg, model)]
        points: list[Measured] = []
        for mid in mine:
            runs = qs.bench_runs(loc, host, mid)["run_id"].tolist()
            frame = qs.bench_results(loc, runs, mid)
            points += points_from_bench(frame.to_dict("records"), qs.bench_server_args(loc, runs),
                                        (model, hw), skipped)  # fmt: skip
        servers = qp.profiled_servers(loc, host)
        traces = [_trace(loc, row) for row in servers.to_dict("records")
                  if model_matches(row.get("model_id"), model_arg, model)]  # fmt: skip
    except StoreError as exc:
        raise PlannerInputError(f"--calibrate-from-store: store: {exc}") from None
    traces = [t for t in traces if t is not None]
    if not points and not traces and skipped:
        raise PlannerInputError(f"--calibrate-from-store: every stored point of {model.name} on "
                                f"host {host!r} is ruled out: {skipped[0]}")  # fmt: skip
    if not points and not traces:
        have = ", ".join(ids) or "none"
        raise PlannerInputError(
            f"--calibrate-from-store: the store has no serving sweep or profiled trace of "
            f"{model.name} on host {host!r} (its serving runs there are of: {have}); import "
            "one with python -m collectors vllm-bench --results ... --host " + host)  # fmt: skip
    return points, traces


def trace_run(loc, run_id: str, world: int) -> TraceStep:
    """One stored trace run as a profiled step: its server's layout and load when a profile
    collector recorded them, else TP over its ``world`` ranks at its median decode batch."""
    from store.errors import StoreError
    from store.queries import planner as qp

    try:
        host = qp.trace_host(loc, run_id)
        servers = qp.profiled_servers(loc, host) if host else None
        mine = servers[servers["run_id"] == run_id] if servers is not None and not servers.empty \
            else None  # fmt: skip
        server = mine.iloc[0].to_dict() if mine is not None and not mine.empty else \
            {"run_id": run_id, "tp": world, "dp": 1, "ep": False, "engine": "trace"}  # fmt: skip
        step = _trace(loc, server)
    except StoreError as exc:
        raise PlannerInputError(f"trace run {run_id}: store: {exc}") from None
    if step is None:
        raise PlannerInputError(f"trace run {run_id}: no decode steps stored")
    return step


def _trace(loc, server: dict[str, Any]) -> TraceStep | None:
    """A profiled server's trace as a step of its layout at its load's concurrency."""
    from store.queries import planner as qp

    run = server["run_id"]
    rows = qp.trace_breakdowns(loc, run)
    if rows.empty or not _num(server.get("tp")):
        return None
    b = rows.iloc[0]
    tp, dp = int(server["tp"]), int(_num(server.get("dp")) or 1)
    ep = tp * dp if server.get("ep") is True else 1
    anatomy = qp.trace_allreduce_anatomy(loc, run)
    transfer = qp.trace_allreduce_transfer(loc, run)
    calls = anatomy.calls_per_step if anatomy else transfer.calls_per_step if transfer else 0.0
    conc = int(_num(server.get("concurrency")) or _num(b.get("gen_tokens")) or 1)
    what = f"{server.get('engine')}-profile" if server.get("engine") != "trace" else \
        f"assumed TP={tp}"  # fmt: skip
    return TraceStep(serve_layout(tp, dp, ep), conc, float(b["step_ms"]), float(b["allreduce_ms"]),
                     calls, f"trace run {run} ({what})",
                     transfer.transfer_us if transfer else None,
                     float(b["all_to_all_ms"]))  # fmt: skip



# ---- the CLIs' flags ----------------------------------------------------------------------
def add_arguments(p) -> None:
    """``--measured FILE.csv`` and ``--calibrate-from-store`` (python -m planner, predict)."""
    p.add_argument("--measured", metavar="FILE.csv",
                   help="calibrate on these measured points of this host (columns tp, dp, ep, "
                   "isl, osl, concurrency, tpot_ms; optional ttft_ms, engine)")  # fmt: skip
    p.add_argument("--calibrate-from-store", action="store_true",
                   help="calibrate on the host's stored serving sweeps and profiled traces of "
                   "this model (with --host-from-store HOST and --store)")  # fmt: skip


def gather(args, model: ModelSpec, hw: HardwareSpec, stored_host: str | None,
           ) -> tuple[list[Measured], list[TraceStep], list[str]]:  # fmt: skip
    """The measured points and traces the parsed flags name (empty when none), and the stored
    points skipped because physics rules them out on ``hw``. A ``--measured`` point physics
    rules out is refused (PlannerInputError)."""
    if getattr(args, "preset", None) and (args.measured or args.calibrate_from_store):
        raise PlannerInputError("--preset is published figures only (its calibration is the "
                                "published service TPOT); --measured and --calibrate-from-store "
                                "need --model and --host")  # fmt: skip
    points: list[Measured] = read_measured(args.measured) if args.measured else []
    for p in points:
        if why := ruled_out(p, model, hw):
            raise PlannerInputError(f"{p.source}: {why}")
    traces: list[TraceStep] = []
    skipped: list[str] = []
    if args.calibrate_from_store:
        if not stored_host:
            raise PlannerInputError("--calibrate-from-store: needs --host-from-store HOST (whose "
                                    "stored runs to use)")  # fmt: skip
        from planner.hosts import store_or_none

        loc = store_or_none(args.store)
        if loc is None:
            raise PlannerInputError("--calibrate-from-store: there is no store (give --store)")
        stored, traces = from_store(loc, stored_host, args.model, model, hw, skipped)
        points += stored
    return points, traces, skipped
