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
"""

from __future__ import annotations

from planner import hosts, measurements
from planner.cost import expert_load
from planner.cost.bands import band
from planner.cost.calibrate import HostCalibration, Measured, TraceStep, calibrate
from planner.cost.comm import curves_from_rows
from planner.cost.expert_load import ExpertLoad
from planner.cost.floors import KERNEL_FLOOR_US
from planner.cost.params import FITTED
from planner.cost.serving import ServeLayout, Workload, kv_capacity, params_for_loaded_run, predict
from planner.errors import PlannerInputError
from planner.floor_inputs import RunFacts
from planner.floor_report import FloorReport
from planner.floor_report import for_stored_run as stored_floors
from planner.floor_report import from_rows as floors_from_rows
from planner.policy.check import PolicyError, load_policy
from planner.policy.lint import lint_text
from planner.policy.trace_check import check_kernels, quantize_candidates, run_verdict
from planner.specs import config_fields, hardware, host_file, models
from planner.specs.engines import ENGINES
from planner.specs.launch_flags import row_settings
from planner.specs.native import HINTS as NATIVE_HINTS
from planner.tradeoff import reference
from planner.tradeoff.engine_commands import sglang_only_lines
from planner.tradeoff.layouts import Layout, default_layouts
from planner.tradeoff.plan import MAX_CONCURRENCY, plan
from planner.tradeoff.recommend import call_at
from planner.tradeoff.report_json import result_commands
from planner.tradeoff.slo import STATS as SLO_STATS
from planner.tradeoff.slo import SloAnswer, Targets, latency, meet_targets
from planner.tradeoff.types import REPORT_CONCURRENCIES, TERMS, PlanResult

__all__ = [
    # errors
    "PlannerInputError", "PolicyError",
    # specs: model, host, launch flags
    "hardware", "host_file", "hosts", "models", "config_fields", "NATIVE_HINTS", "row_settings",
    "ENGINES",
    # the serving cost model
    "FITTED", "ServeLayout", "Workload", "predict", "kv_capacity", "params_for_loaded_run",
    "band", "Measured", "TraceStep", "HostCalibration", "calibrate", "measurements",
    "curves_from_rows",
    # a trace run's steps against their physical floors
    "RunFacts", "FloorReport", "floors_from_rows", "stored_floors", "KERNEL_FLOOR_US",
    # a measured expert-routing distribution and its EP placements
    "ExpertLoad", "expert_load",
    # the tradeoff plan and its report
    "plan", "MAX_CONCURRENCY", "PlanResult", "Layout", "default_layouts", "REPORT_CONCURRENCIES",
    "TERMS", "call_at", "result_commands", "sglang_only_lines", "reference",
    # latency targets in, the best layout out
    "Targets", "SloAnswer", "meet_targets", "latency", "SLO_STATS",
    # the precision policy
    "load_policy", "lint_text", "check_kernels", "quantize_candidates", "run_verdict",
]  # fmt: skip
