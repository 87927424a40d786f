"""Which GEMMs a quantized checkpoint leaves in the model dtype, read from its ignore list.

The list comes as compressed-tensors ``ignore`` (``re:`` regexes), ModelOpt
``exclude_modules`` (globs) or HF FP8 ``modules_to_not_convert`` (exact names). An entry
keeps a component unquantized when it names the component's module whole
(``model.layers.*.self_attn``, ``re:.*shared_experts.*``) or one of its projection GEMMs
(``self_attn.o_proj``, ``re:.*mlp\\.(gate|up)_proj.*``). Norms, biases, the MoE router gate
and the sparse-attention indexer are not (zai-org/GLM-5-FP8 lists all of those and quantizes
every projection). Whole-layer entries (``model.layers.0*``) keep the dense MLP unquantized
when they cover every leading dense layer (nvidia/Kimi-K2.6-NVFP4, GLM-5.1-NVFP4).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The module names each component's GEMMs live under, in HF checkpoints.
MODULES = {
    "attention": ("self_attn", "linear_attn", "attention", "attn"),
    "shared": ("shared_experts", "shared_expert"),
    "dense_mlp": ("mlp",),
}
_NOT_GEMMS = ("norm", "bias", "indexer", "expert", "router", "gate.")
_WILDCARDS = ".*\\()?^$"
_WHOLE_LAYER = re.compile(r"layers\.(\d+)(?:\.\*|\*)$")


def _keeps(entry: str, module: str) -> bool:
    """Whether one ignore entry keeps GEMM weights of ``module`` unquantized."""
    found = re.search(rf"(?:^|[.*]){re.escape(module)}(?=$|[.*\\(])(.*)$", entry)
    if not found:
        return False
    tail = found.group(1).strip(_WILDCARDS)
    if not tail:
        return True  # the module itself, or a pattern covering all of it
    if any(word in tail + "." for word in _NOT_GEMMS):
        return False
    return tail.split(".")[-1].endswith("proj")


def unquantized(ignore: Iterable[str], dense_layers: int) -> set[str]:
    """The components (attention, shared, dense_mlp) the ignore list keeps unquantized."""
    entries = [e.removeprefix("re:") for e in ignore]
    out = {comp for comp, names in MODULES.items()
           if any(_keeps(e, name) for e in entries for name in names)}  # fmt: skip
    whole = {int(m.group(1)) for e in entries if (m := _WHOLE_LAYER.search(e))}
    if dense_layers and set(range(dense_layers)) <= whole:
        out.add("dense_mlp")
    return out
