"""The server's parallel layout and version-specific advice.

Sources, in order of trust: ``--server-args`` (the ``vllm serve`` command line), the
server's ``/server_info`` (vLLM exposes it only with ``VLLM_SERVER_DEV_MODE=1``), and the
rank indices in the trace file names (``dp{d}_pp{p}_tp{t}_dcp{c}_ep{e}_rank{r}...``).
The ``Layout`` itself is shared by every engine (collectors/serving/layout.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

from collectors.serving.layout import Layout, int_flag, redact, split_flags  # noqa: F401  (shared; re-exported)

# vLLM >= 0.13 takes --profiler-config; the VLLM_TORCH_PROFILER_DIR env var works up to 0.15
# and is gone in 0.16 (REFERENCE.md section 6; vllm/entrypoints/serve/profile/api_router.py).
PROFILER_CONFIG_SINCE = (0, 13)
PROFILER_ENV_REMOVED_IN = (0, 16)

_FLAGS = {
    "tp": ("-tp", "--tensor-parallel-size"),
    "pp": ("-pp", "--pipeline-parallel-size"),
    "dp": ("-dp", "--data-parallel-size"),
}
_FILE_RANKS = re.compile(r"dp(\d+)_pp(\d+)_tp(\d+)_dcp(\d+)_ep(\d+)_rank(\d+)")


def parse_version(text: str | None) -> tuple[int, int] | None:
    """``0.13.1rc2.dev5+g...`` -> (0, 13); None when unknown."""
    if not text:
        return None
    m = re.match(r"v?(\d+)\.(\d+)", str(text).strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def profiler_hint(version: str | None, trace_dir: str) -> str:
    """How to enable the torch profiler on a server of this vLLM version.

    ``ignore_frontend`` (ProfilerConfig, vllm/config/profiler.py, since the config's first
    release 0.13; it folded in the AsyncLLM opt-out of vllm-project/vllm#28987) keeps the
    API server's CPU-only ``*.async_llm.*`` trace out of the folder: it is not a rank.
    """
    config = json.dumps(
        {"profiler": "torch", "torch_profiler_dir": trace_dir, "ignore_frontend": True},
        separators=(",", ":"),
    )
    flag = f"vllm serve ... --profiler-config '{config}'"
    env = f"VLLM_TORCH_PROFILER_DIR={trace_dir} vllm serve ..."
    v = parse_version(version)
    if v is None:
        return f"start it with `{flag}` (vLLM >= 0.13) or `{env}` (older vLLM)"
    if v < PROFILER_CONFIG_SINCE:
        return f"restart it with `{env}` (vLLM {version} has no --profiler-config)"
    if v < PROFILER_ENV_REMOVED_IN:
        return f"restart it with `{flag}` (or the older `{env}`)"
    return f"restart it with `{flag}` (the VLLM_TORCH_PROFILER_DIR variable is gone since 0.16)"


def profiler_kind(server_args: str | None, info: Any = None) -> str | None:
    """``torch`` | ``cuda`` from ``--profiler-config`` (JSON or ``--profiler-config.profiler=``)
    or ``/server_info``'s ``vllm_config.profiler_config``; None when neither says."""
    if isinstance(info, dict) and isinstance(info.get("vllm_config"), dict):
        cfg = info["vllm_config"].get("profiler_config")
        if isinstance(cfg, dict) and cfg.get("profiler"):
            return str(cfg["profiler"])
    try:
        values = split_flags(server_args or "")[0]
    except ValueError:
        return None
    if "--profiler-config.profiler" in values:
        return values["--profiler-config.profiler"]
    try:
        cfg = json.loads(values.get("--profiler-config", ""))
    except ValueError:
        return None
    return str(cfg.get("profiler")) if isinstance(cfg, dict) and cfg.get("profiler") else None


_ENV_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def from_server_args(text: str) -> Layout:
    """Parse a ``vllm serve`` command line (or just its flags)."""
    values, flags, positional = split_flags(text)
    layout = Layout(**{name: int_flag(values, names) or 1 for name, names in _FLAGS.items()},
                    source="server-args")  # fmt: skip
    layout.ep = bool(flags & {"--enable-expert-parallel", "-ep"}) or values.get(
        "--enable-expert-parallel", ""
    ).lower() in ("1", "true")
    layout.all2all_backend = values.get("--all2all-backend")
    layout.kv_cache_dtype = values.get("--kv-cache-dtype")
    layout.quantization = values.get("--quantization") or values.get("-q")
    # A pasted command may start with environment settings (VLLM_...=1 vllm serve MODEL).
    words = [p for p in positional
             if p not in ("vllm", "serve", "python", "-m") and not _ENV_SETTING.match(p)]
    layout.model = values.get("--model") or (words[0] if words else None)
    return layout


def from_server_info(info: Any) -> Layout | None:
    """From ``GET /server_info?config_format=json`` (vllm_config.parallel_config)."""
    if not isinstance(info, dict) or not isinstance(info.get("vllm_config"), dict):
        return None
    cfg = info["vllm_config"]
    par = cfg.get("parallel_config") or {}
    if not isinstance(par, dict) or "tensor_parallel_size" not in par:
        return None
    cache = cfg.get("cache_config") or {}
    model = cfg.get("model_config") or {}
    return Layout(
        tp=int(par.get("tensor_parallel_size") or 1),
        pp=int(par.get("pipeline_parallel_size") or 1),
        dp=int(par.get("data_parallel_size") or 1),
        ep=bool(par.get("enable_expert_parallel")),
        all2all_backend=par.get("all2all_backend"),
        kv_cache_dtype=cache.get("cache_dtype") if isinstance(cache, dict) else None,
        quantization=model.get("quantization") if isinstance(model, dict) else None,
        model=model.get("model") if isinstance(model, dict) else None,
        source="server_info",
    )


def from_trace_names(names: list[str]) -> Layout | None:
    """Sizes from the rank indices in vLLM's trace file names (EP unknown from names alone)."""
    found = [tuple(map(int, m.groups())) for n in names if (m := _FILE_RANKS.search(n))]
    if not found:
        return None
    dp, pp, tp = (max(f[i] for f in found) + 1 for i in range(3))
    return Layout(tp=tp, pp=pp, dp=dp, ep=None, source="trace-files")
