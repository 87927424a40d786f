"""The planner's one door for pages, collectors and other tools (a test keeps pages to it).

What lies behind it (each package's ``__init__`` says what it owns):

- ``planner.specs``: the model (``models``), the host (``hardware``, ``host_file``), the
  engines' scheduler defaults and what a stored run's launch flags say;
- ``planner.cost``: the one serving cost model (``predict``), its error bands and its
  calibration from a host's own measurements;
- ``planner.tradeoff``: ``plan(...)``, the layouts and everything a plan report shows, and
  ``meet_targets`` (the layout serving the most per GPU within TPOT / TTFT targets);
- ``planner.policy``: the full-precision policy, the launch-command linter, trace checks;
- ``planner.hosts``: a host from a preset, a host file or the store's NVML run;
- ``planner.floor_inputs`` / ``planner.floor_report``: a trace run's steps against their
  physical floors (planner.cost.floors), per category.

Modules a page reads several names of (``hardware``, ``models``, ``host_file``, ``hosts``,
``reference``, ``expert_load``, ``measurements``, ``config_fields``) are exported whole;
everything else by name.

Each name is loaded on first use (PEP 562 ``__getattr__``): a page pays only for the planner
parts it uses. Importing every part took ~0.5 s, a sixth of a new process's first Policy
page, which needs only the policy checks (~0.1 s). tests/planner/test_api.py loads every
name and keeps the planner's own modules off this door (no circle through it).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> (module, attribute): what ``from planner.api import name`` loads on first use
_EXPORTS: dict[str, tuple[str, str]] = {
    # errors
    "PlannerInputError": ("planner.errors", "PlannerInputError"),
    "PolicyError": ("planner.policy.check", "PolicyError"),
    # specs: model, host, launch flags
    "hardware": ("planner.specs", "hardware"),
    "host_file": ("planner.specs", "host_file"),
    "hosts": ("planner", "hosts"),
    "models": ("planner.specs", "models"),
    "config_fields": ("planner.specs", "config_fields"),
    "NATIVE_HINTS": ("planner.specs.native", "HINTS"),
    "row_settings": ("planner.specs.launch_flags", "row_settings"),
    "ENGINES": ("planner.specs.engines", "ENGINES"),
    # the serving cost model
    "FITTED": ("planner.cost.params", "FITTED"),
    "ServeLayout": ("planner.cost.serving", "ServeLayout"),
    "Workload": ("planner.cost.serving", "Workload"),
    "predict": ("planner.cost.serving", "predict"),
    "kv_capacity": ("planner.cost.serving", "kv_capacity"),
    "params_for_loaded_run": ("planner.cost.serving", "params_for_loaded_run"),
    "band": ("planner.cost.bands", "band"),
    "Measured": ("planner.cost.calibrate", "Measured"),
    "TraceStep": ("planner.cost.calibrate", "TraceStep"),
    "HostCalibration": ("planner.cost.calibrate", "HostCalibration"),
    "calibrate": ("planner.cost.calibrate", "calibrate"),
    "measurements": ("planner", "measurements"),
    "curves_from_rows": ("planner.cost.comm", "curves_from_rows"),
    # a trace run's steps against their physical floors
    "RunFacts": ("planner.floor_inputs", "RunFacts"),
    "FloorReport": ("planner.floor_report", "FloorReport"),
    "floors_from_rows": ("planner.floor_report", "from_rows"),
    "stored_floors": ("planner.floor_report", "for_stored_run"),
    "KERNEL_FLOOR_US": ("planner.cost.floors", "KERNEL_FLOOR_US"),
    # a measured expert-routing distribution and its EP placements
    "ExpertLoad": ("planner.cost.expert_load", "ExpertLoad"),
    "expert_load": ("planner.cost", "expert_load"),
    # the tradeoff plan and its report
    "plan": ("planner.tradeoff.plan", "plan"),
    "MAX_CONCURRENCY": ("planner.tradeoff.plan", "MAX_CONCURRENCY"),
    "PlanResult": ("planner.tradeoff.types", "PlanResult"),
    "Layout": ("planner.tradeoff.layouts", "Layout"),
    "default_layouts": ("planner.tradeoff.layouts", "default_layouts"),
    "REPORT_CONCURRENCIES": ("planner.tradeoff.types", "REPORT_CONCURRENCIES"),
    "TERMS": ("planner.tradeoff.types", "TERMS"),
    "call_at": ("planner.tradeoff.recommend", "call_at"),
    "result_commands": ("planner.tradeoff.report_json", "result_commands"),
    "sglang_only_lines": ("planner.tradeoff.engine_commands", "sglang_only_lines"),
    "reference": ("planner.tradeoff", "reference"),
    # latency targets in, the best layout out
    "Targets": ("planner.tradeoff.slo", "Targets"),
    "SloAnswer": ("planner.tradeoff.slo", "SloAnswer"),
    "meet_targets": ("planner.tradeoff.slo", "meet_targets"),
    "latency": ("planner.tradeoff.slo", "latency"),
    "SLO_STATS": ("planner.tradeoff.slo", "STATS"),
    # the precision policy
    "load_policy": ("planner.policy.check", "load_policy"),
    "lint_text": ("planner.policy.lint", "lint_text"),
    "check_kernels": ("planner.policy.trace_check", "check_kernels"),
    "check_runs": ("planner.policy.trace_check", "check_runs"),
    "quantize_candidates": ("planner.policy.trace_check", "quantize_candidates"),
    "run_verdict": ("planner.policy.trace_check", "run_verdict"),
}  # fmt: skip
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    """``name``'s object, its module imported now (then kept here: later lookups are plain)."""
    try:
        module_name, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    try:
        value = getattr(module, attr)
    except AttributeError:  # a submodule not imported yet (``from planner import hosts``)
        value = importlib.import_module(f"{module_name}.{attr}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
