"""A trace run's steps against their physical floors: per category, per step, per rank.

Reads plain rows of one run's trace tables (in memory at import, or from the store) and its
inputs (planner.floor_inputs); the floors are planner.cost.floors'. Per rank, a category's
measured time and floor are means over the rank's steps (a step without the category counts
zero), as the Kernel page counts them; the step's floor is the sum of its categories'. The top
level is the busiest rank's (the largest mean step).

Per step, the batch and context come from the step's annotation (trace_steps), else from
``--batch`` / ``--context``; without them the floors take the least there is (one sequence, no
context: still floors) and the input is named as missing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.cost.floors import Floor, step_floors
from planner.cost.step_ops import Attend, StepShape
from planner.errors import PlannerInputError
from planner.floor_inputs import FloorInputs, RunFacts
from store.trace_vocab import COMM

BYTES_MODEL = ("gemm", "moe", "attention", "sampling")  # floors from the model's bytes / FLOPs


@dataclass(frozen=True)
class CategoryFloor:
    category: str
    measured_us: float  # per step
    floor_us: float | None
    assumption: str
    # A floor above the measured time is no result: an input is wrong (which one, here).
    input_error: str = ""

    @property
    def ratio(self) -> float | None:
        return self.measured_us / self.floor_us if self.floor_us and not self.input_error else None

    @property
    def win_us(self) -> float | None:
        """At most this much to win: measured above the floor."""
        if self.floor_us is None or self.input_error:
            return None
        return max(self.measured_us - self.floor_us, 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"measured_us_per_step": round(self.measured_us, 3),
                "floor_us_per_step": None if self.floor_us is None else round(self.floor_us, 3),
                "assumption": self.assumption, "input_error": self.input_error or None}  # fmt: skip


@dataclass(frozen=True)
class RankFloors:
    rank: int
    steps: int
    categories: tuple[CategoryFloor, ...]  # largest measured first
    step_measured_us: float
    step_floor_us: float | None  # None: no floors (a CPU-only trace)

    def to_json(self) -> dict[str, Any]:
        return {"categories": {c.category: c.to_json() for c in self.categories},
                "step": {"measured_us": round(self.step_measured_us, 3),
                         "floor_us": None if self.step_floor_us is None
                         else round(self.step_floor_us, 3)}}  # fmt: skip


@dataclass(frozen=True)
class FloorReport:
    ranks: tuple[RankFloors, ...]
    missing: tuple[str, ...]
    described: dict[str, str]

    @property
    def busiest(self) -> RankFloors | None:
        return max(self.ranks, key=lambda r: r.step_measured_us, default=None)

    def to_json(self) -> dict[str, Any]:
        """The issue's shape: categories, step, missing; per_rank where ranks differ."""
        top = self.busiest
        out = top.to_json() if top else {"categories": {}, "step": {"measured_us": None,
                                                                     "floor_us": None}}  # fmt: skip
        out["missing"] = list(self.missing)
        if len(self.ranks) > 1:
            out["per_rank"] = {str(r.rank): r.to_json() for r in self.ranks}
        return out

    def input_errors(self) -> list[str]:
        """One line per category of the busiest rank whose floor exceeds its measured time."""
        top = self.busiest
        return [f"{c.category}: {c.input_error}" for c in (top.categories if top else ())
                if c.input_error]  # fmt: skip

    def text_lines(self) -> list[str]:
        top = self.busiest
        if top is None:
            return ["no steps with categorised time: nothing to floor"]
        who = f"rank {top.rank}, the busiest of {len(self.ranks)}" if len(self.ranks) > 1 \
            else f"rank {top.rank}"  # fmt: skip
        lines = [f"Floors per step ({who}, mean of {top.steps} step(s)):",
                 f"{'category':<16}{'measured us':>13}{'floor us':>11}{'measured/floor':>16}"
                 f"{'at most to win':>16}"]  # fmt: skip
        rows = [*top.categories, CategoryFloor("step", top.step_measured_us, top.step_floor_us,
                                               "")]  # fmt: skip
        for c in rows:
            ratio = "input error" if c.input_error else f"{c.ratio:.1f}x" if c.ratio else "-"
            win = f"{c.win_us / 1e3:.2f} ms" if c.win_us is not None else "-"
            floor = f"{c.floor_us:.1f}" if c.floor_us is not None else "-"
            lines.append(f"{c.category:<16}{c.measured_us:>13.1f}{floor:>11}{ratio:>16}{win:>16}")
        if self.input_errors():
            lines += ["", "Input errors (a floor above its measured time is no result):"]
            lines += [f"  {e}" for e in self.input_errors()]
        lines += ["", "Assumptions:"] + [f"  {c.category}: {c.assumption}" for c in top.categories]
        lines += [f"  {k}: {v}" for k, v in self.described.items()]
        if self.missing:
            lines += ["", "Missing:"] + [f"  {m}" for m in self.missing]
        return lines


def step_shape(row: dict[str, Any], inp: FloorInputs) -> tuple[StepShape, list[str]]:
    """A step's shape from its row (trace_steps) and the flags; what it lacked."""
    lacks: list[str] = []
    gen_req, gen_tok = _int(row.get("generation_requests")), _int(row.get("generation_tokens"))
    ctx_req, ctx_tok = _int(row.get("context_requests")), _int(row.get("context_tokens"))
    seqs = inp.batch if inp.batch is not None else gen_req
    if seqs is None and not ctx_req:
        lacks.append("batch")
        seqs = 1  # the least: one sequence
    seqs = seqs or 0
    tokens = float(gen_tok if inp.batch is None and gen_tok is not None else seqs)
    attends = []
    if seqs:
        kv = _int(row.get("generation_kv_tokens"))
        if inp.context is not None:
            ctx = inp.context
        elif kv is not None and gen_req:
            ctx = kv / gen_req
        else:
            lacks.append("context")
            ctx = 0.0  # the least: no KV read
        attends.append(Attend.decode(np.asarray(float(seqs)), ctx))
    if ctx_req and ctx_tok:
        tokens += ctx_tok
        kv, pairs = _int(row.get("context_kv_tokens")), _int(row.get("context_attended"))
        if kv is not None and pairs is not None:
            attends.append(Attend(np.asarray(float(ctx_req)), np.asarray(kv / ctx_req),
                                  np.asarray(float(ctx_tok)), np.asarray(pairs / ctx_tok),
                                  prefill=True))  # fmt: skip
    sampled = float(max(seqs + (ctx_req or 0), 1))
    t = np.asarray(max(tokens, 1.0))
    return StepShape(t, np.asarray(sampled), tuple(attends), t * inp.layout.dp), lacks


_LACKS = {
    "batch": "batch: the steps carry no batch (step source {source}); --batch N gives the decode "
             "sequences per step (floors assume 1, a lower bound)",
    "context": "context: the steps carry no context lengths (step source {source}); --context "
               "TOKENS gives the mean KV tokens per decode sequence (floors assume none: the "
               "KV reads get no floor)",
}  # fmt: skip


def build(inp: FloorInputs, steps: list[dict[str, Any]],
          categories: list[dict[str, Any]]) -> FloorReport:  # fmt: skip
    """The report of one run: ``steps`` rows (rank, step, source, wall_us and the batch /
    context columns of trace_steps) and ``categories`` rows (rank, step, category, calls,
    total_us of trace_step_categories)."""
    per_step: dict[tuple[int, int], dict[str, tuple[float, float]]] = defaultdict(dict)
    for c in categories:
        per_step[(int(c["rank"]), int(c["step"]))][str(c["category"])] = (
            float(c["calls"] or 0), float(c["total_us"] or 0.0))
    by_rank: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in steps:
        by_rank[int(s["rank"])].append(s)
    lacking: dict[str, str] = {}
    cache: dict[tuple, dict[str, Floor]] = {}
    ranks = []
    for rank in sorted(by_rank):
        rows = by_rank[rank]
        measured: dict[str, float] = defaultdict(float)
        floors: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for s in rows:
            shape, lacks = step_shape(s, inp)
            for what in lacks if inp.has_gpu else ():
                lacking.setdefault(what, _LACKS[what].format(source=s.get("source") or "?"))
            cats = per_step.get((rank, int(s["step"])), {})
            calls = {c: n for c, (n, _t) in cats.items() if n > 0}
            key = (_key(shape), tuple(sorted(calls.items())))
            if not inp.has_gpu:
                cache[key] = {c: Floor(None, "a CPU-only trace: no GPU floor") for c in calls}
            if key not in cache:
                cache[key] = step_floors(inp.model, inp.hardware, inp.layout, inp.workload,
                                         shape, calls, list(inp.curves))  # fmt: skip
            for c, (_n, total) in cats.items():
                measured[c] += total
            for c, fl in cache[key].items():
                floors[c].append((fl.us, fl.assumption))
        n = max(len(rows), 1)
        cats_out = []
        for c in sorted(measured, key=lambda x: -measured[x]):
            if measured[c] <= 0 and not floors.get(c):
                continue
            got = floors.get(c, [])
            known = [(us, t) for us, t in got if us is not None]
            mean = sum(us for us, _ in known) / n if known else None
            text = _assumption(got, mean, n)
            cats_out.append(CategoryFloor(c, measured[c] / n, mean, text,
                                          input_error(c, measured[c] / n, mean, text, inp)))
        wall = float(np.mean([float(s.get("wall_us") or 0.0) for s in rows]))
        total = sum(c.floor_us or 0.0 for c in cats_out if not c.input_error) \
            if inp.has_gpu else None  # fmt: skip
        ranks.append(RankFloors(rank, len(rows), tuple(cats_out), wall, total))
    described = dict(inp.described)
    return FloorReport(tuple(ranks), inp.missing + tuple(lacking.values()), described)


def input_error(category: str, measured: float, floor: float | None, assumption: str,
                inp: FloorInputs) -> str:  # fmt: skip
    """Why a floor above its measured time is an input error, naming the inputs it rests on
    ("" when the floor is below the measurement, as a floor must be)."""
    if floor is None or floor <= measured:
        return ""
    head = f"its floor {floor:,.1f} us is above the measured {measured:,.1f} us per step, so an "
    if category in COMM:
        return head + (f"input of it is wrong: the comm curve and its sizes, or the calls "
                       f"({assumption})")  # fmt: skip
    if category in BYTES_MODEL:
        used = "; ".join(f"{k} {v.split(' [', 1)[0]}" for k, v in inp.described.items()
                         if k in ("model", "host", "layout", "batch", "context"))  # fmt: skip
        return head + (f"input of it is wrong: the model, the host's spec sheet, the layout, "
                       f"the batch or the context ({used})")  # fmt: skip
    return head + ("input of it is wrong: the kernel count per step (or this GPU runs kernels "
                   "shorter than the 1 us launch floor assumes)")  # fmt: skip


def _assumption(got: list[tuple[float | None, str]], mean: float | None, n: int) -> str:
    if not got:
        return "no floor"
    if (n == 1 and len(got) == 1) or mean is None:
        return got[0][1]
    us, text = min(got, key=lambda g: abs((g[0] or 0.0) - mean))
    return f"mean over {n} steps; the step nearest it: {text}"


def _key(shape: StepShape) -> tuple:
    return (float(shape.tokens), float(shape.sampled), float(shape.moe_tokens),
            tuple((float(a.seqs), float(a.keys), float(a.queries), float(a.keys_per_query),
                   a.prefill) for a in shape.attends))  # fmt: skip


def _int(v: Any) -> int | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == f else None


def for_stored_run(run_id: str, store: str | None = None, model: str | None = None,
                   host: str | None = None, batch: int | None = None,
                   context: float | None = None) -> FloorReport:  # fmt: skip
    """The report of a trace run in the store; PlannerInputError (one line) for a run the
    store lacks or a bad flag."""
    from planner.floor_inputs import facts_from_row, resolve
    from store.errors import StoreError
    from store.location import resolve as resolve_store
    from store.queries import floors as qf
    from store.reader import store_exists

    try:
        loc = resolve_store(store)
        if not store_exists(loc):
            raise PlannerInputError(f"run {run_id}: there is no store at {loc.describe()}")
        row = qf.run_facts(loc, run_id)
        if not row:
            raise PlannerInputError(f"run {run_id}: no trace run with this id in "
                                    f"{loc.describe()} (python -m collectors trace PATH)")  # fmt: skip
        inp = resolve(facts_from_row(row), model, host, batch, context, store)
        steps = qf.steps(loc, run_id).to_dict("records")
        cats = qf.step_categories(loc, run_id).to_dict("records")
    except StoreError as exc:
        raise PlannerInputError(f"store: {exc}") from None
    return build(inp, steps, cats)


def from_rows(facts: RunFacts, steps: list[dict[str, Any]], categories: list[dict[str, Any]],
              model: str | None = None, host: str | None = None, batch: int | None = None,
              context: float | None = None, store: str | None = None) -> FloorReport:  # fmt: skip
    """The report of a run's rows in memory (``trace --json`` before its commit)."""
    from planner.floor_inputs import resolve

    return build(resolve(facts, model, host, batch, context, store), steps, categories)
