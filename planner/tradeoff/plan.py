"""The tradeoff plan: ``plan(...)`` costs every layout, checks the policy, ranks the answers.

Every layout is a serving-model instance (planner.tradeoff.instances) costed by
planner.cost.serving.predict on this host's collectives; nothing else computes a TPOT.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.cost.bands import Band, band
from planner.cost.calibrate import Measured, TraceStep, calibrate
from planner.cost.calibrate_fit import layout_key
from planner.cost.comm import FITTED_OPS, CommCurve, CommSet, published_for
from planner.cost.expert_load import ExpertLoad
from planner.cost.params import DESCRIBE, FITTED, ServingParams
from planner.cost.serving import ENGINES, check_budget, check_client
from planner.cost.step import weights_per_gpu
from planner.errors import PlannerInputError
from planner.policy.check import Policy, check_precision, load_policy
from planner.sched.bench import client_text
from planner.specs.engines import budget_text
from planner.specs.hardware import GIB, HardwareSpec
from planner.specs.models import ModelSpec
from planner.specs.precision import UnknownDtype
from planner.tradeoff.findings import findings
from planner.tradeoff.instances import Instance, instance, predict_instance
from planner.tradeoff.layouts import Layout, default_layouts
from planner.tradeoff.placement import effects, routing_assumption
from planner.tradeoff.recommend import crossovers, policy_costs, ranges, unmeasured_flips
from planner.tradeoff.types import (
    REPORT_CONCURRENCIES,
    TERMS,
    Assumption,
    Collective,
    LayoutCurve,
    LayoutResult,
    PlanResult,
)

__all__ = ["MAX_CONCURRENCY", "REPORT_CONCURRENCIES", "plan"]
MAX_CONCURRENCY = 4096
COMM_SWEEP = "1,2,4,8,16,32,64"


def _grid(concurrencies: Any) -> np.ndarray:
    if concurrencies is None:
        return np.arange(1, 513)
    try:
        arr = np.unique(np.asarray(list(concurrencies), dtype=float))
    except (TypeError, ValueError):
        raise PlannerInputError(f"concurrency: not a list of numbers ({concurrencies!r})") from None
    if arr.size == 0 or np.any(arr < 1) or np.any(arr != np.floor(arr)):
        raise PlannerInputError("concurrency: give whole numbers >= 1")
    if arr.max() > MAX_CONCURRENCY:
        raise PlannerInputError(f"concurrency: at most {MAX_CONCURRENCY}")
    return arr.astype(int)


def layout_curve(model: ModelSpec, hw: HardwareSpec, lay: Layout, inst: Instance,
                 conc: np.ndarray, p: ServingParams, comm: CommSet,
                 tpot_band: Band | None = None) -> LayoutCurve:  # fmt: skip
    """The serving model's curve for one layout, with its band (NaN where it cannot run):
    the fit's for this engine, format and host class, or ``tpot_band`` (a calibration's
    held-back error)."""
    eng = inst.workload.engine
    tb, fb = tpot_band or band(eng, model, "tpot", hw), band(eng, model, "ttft", hw)
    c = np.asarray(conc, dtype=float)
    try:
        pr = predict_instance(model, inst, hw, c, p, comm)
    except PlannerInputError as exc:
        nan = np.full_like(c, np.nan)
        return LayoutCurve(lay, conc, nan, nan, nan, {t: nan for t in TERMS},
                           np.zeros(c.shape, dtype=bool), nan, nan, nan, nan,
                           weights_per_gpu(model, inst.serve), 0.0, np.zeros_like(c), 0, eng,
                           inst.predict_args(), why_not=str(exc))  # fmt: skip
    return LayoutCurve(
        lay, conc, pr.tpot_ms, pr.ttft_ms, pr.output_tok_s,
        {t: np.broadcast_to(pr.breakdown_ms[t], c.shape).astype(float) for t in TERMS},
        pr.admitted.copy(), tb.low(pr.tpot_ms), tb.high(pr.tpot_ms), fb.low(pr.ttft_ms),
        fb.high(pr.ttft_ms), pr.weights_per_gpu_gb * 1e9, pr.kv_capacity_seqs, pr.dummy_ranks,
        pr.allreduce_calls, eng, inst.predict_args(), percentiles=percentiles(pr, c.shape),
        running_mean=pr.running, queued_mean=pr.queued,
    )  # fmt: skip


def percentiles(pr: object, shape: tuple[int, ...]) -> dict[str, dict[str, np.ndarray]]:
    """The prediction's per-request percentiles over the grid, ``{"tpot_ms": {"p90": ...},
    "ttft_ms": {...}, "e2el_ms": {...}}``: the simulated benchmark gives each request its own
    TPOT and TTFT (planner.sched); empty for a prediction that carries none."""
    given = getattr(pr, "percentiles", None) or {}
    return {metric: {stat: np.broadcast_to(np.asarray(v, dtype=float), shape).copy()
                     for stat, v in stats.items()} for metric, stats in given.items()}  # fmt: skip


def _collectives(model: ModelSpec, hw: HardwareSpec, inst: Instance,
                 comm: CommSet) -> list[Collective]:  # fmt: skip
    from planner.cost.step_comm import allreduce_calls, exchange

    s, out = inst.serve, []
    if allreduce_calls(model, s):
        out.append((s.allreduce, s.tp))
    kind = exchange(model, s)
    if kind == "allgather_reducescatter":
        out += [("all_gather", s.gpus), ("reduce_scatter", s.gpus)]
    elif kind == "dispatch_combine":
        out.append(("all_to_all", s.gpus))
    return [Collective(op, n, comm.kind(op, n), comm.get(op, n).source) for op, n in out]


def measure_command(c: Collective, model: ModelSpec) -> str:
    op = "all_reduce" if c.op == "all_reduce_fast" else c.op
    cmd = (f"python -m collectors comm --ops {op} --tokens {COMM_SWEEP} --hidden {model.hidden} "
           f"--nproc {c.world_size}")  # fmt: skip
    if c.op == "all_reduce_fast":
        return (f"{cmd} (the NCCL AllReduce the fast curve is derived from; the custom / "
                "PCIe-IPC AllReduce itself is measured by serving the layout with the "
                "engine's bench command)")  # fmt: skip
    return cmd


def plan(
    model: ModelSpec,
    hardware: HardwareSpec,
    layouts: list[Layout] | None = None,
    concurrencies: Any = None,
    comm_curves: list[CommCurve] | None = None,
    measured: list[Measured] | None = None,
    traces: list[TraceStep] | None = None,
    policy: Policy | None = None,
    isl: int = 1024,
    osl: int = 1024,
    engine: str = "vllm",
    num_prompts: int = 0,
    token_budget: int = 0,
    params: ServingParams = FITTED,
    fill_published: bool = True,
    expert_load: ExpertLoad | None = None,
    bench: str = "inferencex",
    range_ratio: float = -1.0,
    max_running: int = 0,
) -> PlanResult:
    """Predict every layout over the concurrency grid, check it against the policy, rank;
    with the host's ``measured`` points or ``traces``, also the calibrated view.

    ``expert_load``: a measured routing distribution the routed experts are priced on (its
    placement as given, contiguous by default) instead of uniform top-k routing."""
    if isl < 1 or osl < 2:
        raise PlannerInputError("--isl must be >= 1 and --osl >= 2")
    if engine not in ENGINES:
        raise PlannerInputError(f"--engine {engine!r}: one of {', '.join(ENGINES)}")
    check_budget(engine, isl, token_budget)
    check_client(bench, range_ratio, num_prompts, max_running)
    if expert_load is not None:
        expert_load.check(model.num_layers, model.num_experts, model.name)
    pol = policy or load_policy()
    conc = _grid(concurrencies)
    lays = layouts if layouts is not None else default_layouts(model, hardware)
    if not lays:
        raise PlannerInputError("layouts: none selected")
    # Measured curves first; published ones for the same GPUs fill ops nobody measured.
    curves_in = list(comm_curves or [])
    if fill_published:
        curves_in += published_for(hardware.gpu_model, hardware.gpu_count)
    comm = CommSet(curves_in, hardware, params.link_eff)
    res = PlanResult(model=model, hardware=hardware, policy=pol, concurrency=conc, layouts=[],
                     recommended=[], crossovers=[], policy_costs=[], assumptions=[], isl=isl,
                     osl=osl, engine=engine, num_prompts=num_prompts, token_budget=token_budget,
                     expert_load=expert_load, bench=bench, range_ratio=range_ratio,
                     max_running=max_running)  # fmt: skip
    results: list[LayoutResult] = []
    for lay in lays:
        if lay.tp * lay.dp > hardware.gpu_count:
            raise PlannerInputError(f"layout {lay.name!r} needs {lay.tp * lay.dp} GPUs, host "
                                    f"{hardware.name!r} has {hardware.gpu_count}")  # fmt: skip
        try:
            violations = check_precision(model.native, lay.precision(model), pol)
        except UnknownDtype as exc:
            raise PlannerInputError(f"layout {lay.name!r}: {exc}") from None
        inst = _instance(res, lay)
        curve = layout_curve(model, hardware, lay, inst, conc, params, comm)
        used = _collectives(model, hardware, inst, comm)
        weak = [c for c in used if c.op not in FITTED_OPS and c.kind != "measured"]
        results.append(LayoutResult(lay, not violations, violations, curve, None, used, weak,
                                    [measure_command(c, model) for c in weak]))  # fmt: skip
    curves = [r.curve for r in results]
    ok = [r.recommendable for r in results]
    res.layouts = results
    res.recommended, res.crossovers = ranges(curves, ok), crossovers(curves, ok)
    res.policy_costs = policy_costs(curves, [r.compliant for r in results],
                                    [not r.hypothesis for r in results])  # fmt: skip
    if expert_load is not None:
        _placement_effects(res, params, comm)
    if measured or traces:
        _calibrate(res, measured or [], traces or [], params, comm)
    res.comm_sources = [c.describe() for c in comm.used()]
    res.assumptions = _assumptions(res, params, comm)
    res.findings += findings(res)
    return res


def _instance(res: PlanResult, lay: Layout) -> Instance:
    """The serving instance ``lay`` launches for this plan's workload and benchmark."""
    return instance(lay, res.hardware.gpu_count, res.isl, res.osl, res.engine, res.num_prompts,
                    res.token_budget, res.expert_load, res.bench, res.range_ratio,
                    res.max_running)  # fmt: skip


def _calibrate(res: PlanResult, measured: list[Measured], traces: list[TraceStep],
               p: ServingParams, comm: CommSet) -> None:  # fmt: skip
    """The calibrated view: every layout on the host's calibration (planner.cost.calibrate),
    whether applied or not (then the view says why and shows the fitted model)."""
    cal = calibrate(res.model, res.hardware, measured, traces, comm, p)
    measured_names: set[str] = set()
    for r in res.layouts:
        inst = _instance(res, r.layout)
        if cal.fit is not None and layout_key(inst.serve) in cal.fit.offsets:
            measured_names.add(r.layout.name)
        r.calibrated = layout_curve(res.model, res.hardware, r.layout, inst, res.concurrency,
                                    cal.params_for(inst.serve), comm, cal.band)  # fmt: skip
        r.calibrated.calibrated = True
    res.calibration, res.calibration_factors = cal, dict(cal.factors)
    res.recommended_calibrated = ranges([r.calibrated for r in res.layouts],
                                        [r.recommendable for r in res.layouts])  # fmt: skip
    if cal.applied and not cal.carries:
        res.findings += unmeasured_flips(res, measured_names)


def _placement_effects(res: PlanResult, p: ServingParams, comm: CommSet) -> None:
    """Uniform vs measured vs balanced TPOT of every EP layout at the report concurrencies,
    and one finding per layout at the first and last of them (planner.tradeoff.placement)."""
    cs = res.report_concurrencies()
    for r in res.layouts:
        inst = _instance(res, r.layout)
        if inst.serve.moe_ep < 2 or r.curve.why_not:
            continue
        found = effects(res.model, res.hardware, inst, r.layout.name, cs, res.expert_load, p, comm)
        res.placement_effects += found
        ends = [e for e in (found[0], found[-1]) if e.contiguous_ms == e.contiguous_ms]
        if ends:
            res.findings.append("Measured expert load: " + "; ".join(
                e.sentence() for e in dict.fromkeys(ends)) + ".")  # fmt: skip


def _assumptions(res: PlanResult, p: ServingParams, comm: CommSet) -> list[Assumption]:
    m, hw = res.model, res.hardware
    out = [
        Assumption("model", f"{m.name}: {m.num_layers} layers ({m.num_moe_layers} MoE), hidden "
                   f"{m.hidden}, {m.num_experts} experts top-{m.top_k}, {m.attention.upper()}, "
                   f"native {m.native.weights} weights", m.source),
        Assumption("host", f"{hw.gpu_count}x {hw.gpu_model}, {hw.memory_bytes / GIB:.0f} GiB, "
                   f"{hw.mem_bandwidth_gbps:.0f} GB/s, {hw.interconnect}", hw.source),
        Assumption("workload", client_text(res.bench, res.isl, res.osl, res.range_ratio,
                                           res.num_prompts)
                   + f"; engine {res.engine} (SGLang-only layouts on SGLang), "
                   f"{budget_text(res.engine, hw, res.isl, res.token_budget)}",
                   "--isl / --osl / --bench / --range-ratio / --num-prompts / --engine / "
                   "--token-budget / --max-running-requests"),
        routing_assumption(res.expert_load),
        Assumption("error band", band(res.engine, m, "tpot", hw).describe(),
                   "planner/cost/fitted.json bands (python -m fitting --bands --write)"),
        Assumption("policy", res.policy.label, res.policy.path or "built-in"),
    ]  # fmt: skip
    for name, (what, src) in DESCRIBE.items():
        val = getattr(p, name)
        val = val.get(res.engine, val.get("vllm")) if isinstance(val, dict) else val
        out.append(Assumption(name, f"{val:.4g} ({what})", src))
    # a derived curve's description ends with its kind, which the source already shows; a
    # stored one says which of the sizes asked of it it measured and which it extended
    for c in comm.used():
        sizes = comm.explain(c.op, c.world_size)
        out.append(Assumption(f"{c.op} latency", c.describe().removesuffix(f" [{c.kind}]")
                              + (f"; {sizes}" if sizes else ""), c.kind))  # fmt: skip
    out += [Assumption(f"{n.curve.op} over {n.curve.world_size} GPUs", n.sentence(), "not used")
            for n in comm.not_used()]  # fmt: skip
    if res.calibration is not None:
        cal = res.calibration
        factors = ", ".join(f"{k} x{v:.2f}" for k, v in cal.factors.items())
        out.append(Assumption("calibration", f"{cal.sentence()}; factors {factors}",
                              f"the host's measurements: {cal.fitted_on}"))  # fmt: skip
    return out
