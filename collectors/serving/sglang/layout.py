"""An SGLang server's parallel layout, from ``launch_server`` flags or ``/get_server_info``.

Flags from python/sglang/srt/server_args.py (sgl-project/sglang): ``--tp-size``/``--tp``/
``--tensor-parallel-size``, ``--dp-size``/``--dp``, ``--pp-size``, ``--ep-size``/``--ep``,
``--enable-dp-attention``, ``--moe-a2a-backend deepep`` (``--enable-deepep-moe`` before it).
``/get_server_info`` returns the same ``ServerArgs`` fields (``tp_size``, ``dp_size``, ...)
plus ``version``.

SGLang's DP attention splits the *TP group* into ``dp`` attention replicas (the world is
``tp`` GPUs, not ``tp x dp``), so ``--tp 8 --dp 8 --enable-dp-attention --ep 8`` is the
planner's ``dp_attn_ep`` TP1xDP8+EP; ``--tp 8 --ep 8`` (TP attention, EP MoE at DP=1) is
``tp_ep_dp1``. Without DP attention ``--dp`` launches ``dp`` whole TP replicas.
"""

from __future__ import annotations

from typing import Any

from collectors.serving.layout import Layout, int_flag, split_flags

_SIZES = {
    "tp": ("--tp-size", "--tp", "--tensor-parallel-size"),
    "dp": ("--dp-size", "--dp", "--data-parallel-size"),
    "pp": ("--pp-size", "--pp", "--pipeline-parallel-size"),
    "ep": ("--ep-size", "--ep", "--expert-parallel-size"),
}


def _build(tp: int, dp: int, pp: int, ep: int, dp_attention: bool, a2a: str | None,
           source: str) -> Layout:  # fmt: skip
    moe_ep = ep > 1 or (a2a not in (None, "", "none"))
    if dp_attention and dp > 1:  # the dp attention replicas split the TP group
        tp = max(tp // dp, 1)
    return Layout(tp=tp, pp=pp, dp=dp, ep=moe_ep, all2all_backend=a2a, source=source)


def from_server_args(text: str) -> Layout:
    """Parse a ``python -m sglang.launch_server`` command line (or just its flags)."""
    values, flags, _ = split_flags(text)
    sizes = {name: int_flag(values, spellings) or 1 for name, spellings in _SIZES.items()}
    a2a = values.get("--moe-a2a-backend") or ("deepep" if "--enable-deepep-moe" in flags else None)
    layout = _build(sizes["tp"], sizes["dp"], sizes["pp"], sizes["ep"],
                    "--enable-dp-attention" in flags, a2a, "server-args")  # fmt: skip
    layout.kv_cache_dtype = values.get("--kv-cache-dtype")
    layout.quantization = values.get("--quantization")
    layout.model = values.get("--model-path") or values.get("--model")
    return layout


def from_server_info(info: Any) -> Layout | None:
    """From ``GET /get_server_info`` (ServerArgs fields at the top level)."""
    if not isinstance(info, dict) or "tp_size" not in info:
        return None
    def num(key: str) -> int:
        try:
            return int(info.get(key) or 1)
        except (TypeError, ValueError):
            return 1

    a2a = info.get("moe_a2a_backend") or ("deepep" if info.get("enable_deepep_moe") else None)
    layout = _build(num("tp_size"), num("dp_size"), num("pp_size"), num("ep_size"),
                    bool(info.get("enable_dp_attention")), a2a, "server_info")  # fmt: skip
    layout.kv_cache_dtype = info.get("kv_cache_dtype")
    layout.quantization = info.get("quantization")
    layout.model = info.get("model_path")
    return layout
