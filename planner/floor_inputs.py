"""What a trace run's floors need, and where each input came from: the model, the host, the
layout, the collectives' curves (per step batch and context are planner.floor_report's).

Each input comes from the user's flag first, else from what the run recorded, else it is
named as missing (never guessed):

- model: ``--model PRESET|config.json``; else the config.json recorded with the run (a
  profiled server's, or ``trace --model``); else the run's recorded ``model`` argument (the
  ``profile`` collector's shape, or a served name that matches a preset);
- host: ``--host`` a preset, a host file, a stored host (its newest ``gpu`` run) or a GPU name
  of the known-GPU table (``MI300X``); else the GPU name the trace records; else the newest
  stored ``gpu`` run of the run's host;
- layout: the profiled server's flags (TP, DP, EP, all-to-all backend, KV-cache dtype); else
  TP over the trace's world size, said so;
- collectives: the comm runs stored for that host, and curves published for the same GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner import hosts
from planner.cost.comm import CommCurve, published_for
from planner.cost.step_comm import A2A_BACKENDS
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.specs import hardware, models
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

ENGINES = ("vllm", "sglang")


@dataclass(frozen=True)
class RunFacts:
    """What a trace run says about itself: from its import, or from the store."""

    run_id: str = ""
    host: str | None = None  # the run's host (runs.host)
    world_size: int = 1
    devices: tuple[str, ...] = ()  # GPU names the trace files record
    has_gpu: bool = True  # False: a CPU-only trace (its steps are top-level CPU ops)
    engine: str = ""  # the profiled server's engine, "" for a bare trace
    model_id: str | None = None  # the served model's id
    model_config: dict[str, Any] | None = None  # config.json recorded with the run
    config_source: str = ""
    args_model: Any = None  # the run's recorded `model` argument
    tp: int | None = None  # the profiled server's layout flags
    dp: int | None = None
    ep: bool | None = None
    a2a: str | None = None
    kv_dtype: str | None = None
    batch: int | None = None  # the run's recorded --batch / --context (trace, profile)
    context: float | None = None


@dataclass(frozen=True)
class FloorInputs:
    """The resolved inputs: None where missing (``missing`` says which and how to give it)."""

    model: ModelSpec | None
    hardware: HardwareSpec | None
    layout: ServeLayout
    workload: Workload
    curves: tuple[CommCurve, ...] = ()
    batch: int | None = None  # --batch: decode sequences per step, over the trace's
    context: float | None = None  # --context: mean KV tokens per decode sequence
    described: dict[str, str] = field(default_factory=dict)  # input -> value [source]
    missing: tuple[str, ...] = ()
    has_gpu: bool = True


def resolve(facts: RunFacts, model: str | None = None, host: str | None = None,
            batch: int | None = None, context: float | None = None,
            store: str | None = None) -> FloorInputs:  # fmt: skip
    """The run's floor inputs; a bad flag is a PlannerInputError (one line)."""
    if not facts.has_gpu:
        return FloorInputs(None, None, ServeLayout(tp=1), Workload(1, 2), missing=(
            "host: a CPU-only trace (no GPU events): floors are of GPU steps",), has_gpu=False)
    if batch is not None and batch < 1:
        raise PlannerInputError(f"--batch {batch}: give the decode sequences per step, >= 1")
    if context is not None and not context >= 0:
        raise PlannerInputError(f"--context {context}: give the mean context per sequence in "
                                "tokens, >= 0")  # fmt: skip
    described: dict[str, str] = {}
    missing: list[str] = []
    for what, flag, saved in (("batch", batch, facts.batch), ("context", context, facts.context)):
        if flag is not None:
            described[what] = f"{flag:g} [--{what}]"
        elif saved is not None:
            described[what] = f"{saved:g} [recorded with the run: its --{what}]"
    batch = batch if batch is not None else facts.batch
    context = context if context is not None else facts.context
    spec, why = _model(facts, model)
    if spec is not None:
        described["model"] = f"{spec.name} [{spec.source}]"
    else:
        missing.append(why)
    found, stored, why = _host(facts, host, store)
    if found is not None:
        described["host"] = (f"{found.gpu_model}: {found.mem_bandwidth_gbps:,.0f} GB/s, "
                             f"{found.bf16_tflops:,.0f} TFLOPS BF16 [{found.source}]")  # fmt: skip
    else:
        missing.append(why)
    lay, described["layout"] = _layout(facts)
    curves: list[CommCurve] = []
    if found is not None:
        curves = _stored_curves(stored or facts.host, store, found.interconnect)
        curves += published_for(found.gpu_model, found.gpu_count)
    kv = str(facts.kv_dtype or "").lower()
    kv = "" if kv in ("", "auto", "none") else ("fp8_e4m3" if "fp8" in kv else kv)
    engine = facts.engine if facts.engine in ENGINES else "vllm"
    return FloorInputs(spec, found, lay, Workload(1, 2, engine, kv_dtype=kv), tuple(curves),
                       batch, context, described, tuple(missing), has_gpu=True)  # fmt: skip


def _model(facts: RunFacts, flag: str | None) -> tuple[ModelSpec | None, str]:
    if flag:
        return models.resolve(flag), ""
    reasons = []
    if facts.model_config is not None:
        try:
            return models.from_config(facts.model_config, name=facts.model_id or "",
                                      source=facts.config_source), ""  # fmt: skip
        except PlannerInputError as exc:
            reasons.append(f"its recorded config.json is unusable ({exc})")
    if facts.args_model is not None:
        try:
            return models.from_run_metadata(facts.args_model, f"run {facts.run_id}"), ""
        except PlannerInputError as exc:
            reasons.append(str(exc))
    if facts.model_id:
        name = models.preset_for_name(facts.model_id)
        if name is not None:
            return models.preset(name), ""
        reasons.append(f"served model {facts.model_id!r} matches no preset and its "
                       "config.json was not recorded")  # fmt: skip
    why = "; ".join(reasons) or "the trace does not name it (no recorded server or config.json)"
    return None, (f"model: {why}; --model PRESET|config.json gives it (without it: launch "
                  "floors only)")  # fmt: skip


def _host(facts: RunFacts, flag: str | None,
          store: str | None) -> tuple[HardwareSpec | None, str | None, str]:  # fmt: skip
    """(spec, the stored host whose comm runs apply, why missing)."""
    count = max(facts.world_size, 1)
    if flag:
        try:
            h = hosts.resolve(flag, store)
            return h.hardware, h.stored, ""
        except PlannerInputError as exc:
            hw = hardware.from_gpu_name(flag, count, f"--host {flag}")
            if hw is None:
                raise PlannerInputError(f"{exc}; nor a GPU of the known-GPU table "
                                        f"({', '.join(hardware.known_gpu_names())})") from None
            return hw, None, ""
    for name in facts.devices:
        hw = hardware.from_gpu_name(name, count, f"the trace's GPU name {name!r}")
        if hw is not None:
            return hw, None, ""
    if facts.host:
        try:
            h = hosts.from_store(facts.host, store)
            return h.hardware, h.stored, ""
        except PlannerInputError:
            pass
    said = (f"the trace's GPU {facts.devices[0]!r} is not in the known-GPU table"
            if facts.devices else "the trace names no GPU (deviceProperties without a name)")
    return None, None, (f"host: {said} and the store has no `gpu` run for host "
                        f"{facts.host or '?'}; --host PRESET|FILE|GPU gives it (without it: "
                        "launch floors only)")  # fmt: skip


def _layout(facts: RunFacts) -> tuple[ServeLayout, str]:
    if facts.tp:
        tp, dp = int(facts.tp), int(facts.dp or 1)
        ep = tp * dp if facts.ep else 1
        a2a = facts.a2a if facts.a2a in A2A_BACKENDS and ep > 1 else ""
        lay = ServeLayout(tp=tp, dp=dp, moe_ep=ep, a2a=a2a)
        return lay, f"{lay.describe()} [the profiled server's flags]"
    n = max(facts.world_size, 1)
    return ServeLayout(tp=n), (f"TP={n} [the trace's world size; no recorded server flags]")


def _stored_curves(host: str | None, store: str | None, interconnect: str) -> list[CommCurve]:
    """Measured curves of the host's GPU comm runs in the store; [] when none or no store."""
    if not host:
        return []
    from store.errors import StoreError
    from store.location import resolve as resolve_store
    from store.reader import store_exists

    try:
        loc = resolve_store(store)
        return hosts.host_comm_curves(loc, host, interconnect) if store_exists(loc) else []
    except StoreError:
        return []


def facts_from_row(row: dict[str, Any]) -> RunFacts:
    """RunFacts from store.queries.floors.run_facts' row."""
    import json

    def text(key: str) -> str | None:
        v = row.get(key)
        return str(v) if isinstance(v, str) and v else None

    def number(key: str) -> int | None:
        try:
            v = float(row.get(key))
        except (TypeError, ValueError):
            return None
        return int(v) if v == v else None

    config = None
    if text("config_json"):
        try:
            config = json.loads(row["config_json"])
            if text("quant_config_json"):
                config = models.with_modelopt(config, json.loads(row["quant_config_json"]))
        except ValueError:
            config = None
    args_model = None
    if text("args_model"):
        try:
            args_model = json.loads(row["args_model"])
        except ValueError:
            args_model = None
    ep = row.get("ep")
    return RunFacts(
        run_id=str(row.get("run_id") or ""), host=text("host"),
        world_size=max(number("world_size") or 0, number("ranks") or 0, 1),
        devices=tuple(d for d in (text("devices") or "").split("\n") if d),
        has_gpu=_flag(row.get("has_gpu"), True),
        engine=text("engine") or "", model_id=text("model_id") or text("config_model_id"),
        model_config=config,
        config_source=f"config.json recorded with run {row.get('run_id')} "
                      f"({text('source_path') or '?'})",
        args_model=args_model, tp=number("tp"), dp=number("dp"),
        ep=bool(ep) if isinstance(ep, bool | int) else None,
        a2a=text("all2all_backend"), kv_dtype=text("kv_cache_dtype"),
        batch=number("args_batch"), context=_float(row.get("args_context")),
    )  # fmt: skip


def _flag(v: Any, default: bool) -> bool:
    """A store boolean (numpy's, or NULL / NaN: ``default``)."""
    return default if v is None or v != v else bool(v)


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None
