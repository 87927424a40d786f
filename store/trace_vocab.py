"""The trace taxonomy's vocabulary, shared by the collector (collectors/trace) and the store
queries, so both spell every category, comm source and cast op the same way.

Plain constants only: store/ must not import collectors/, and this module imports nothing.
"""

from __future__ import annotations

# Every GPU kernel (or top-level CPU op) gets exactly one of these, in the order charts
# stack them: compute first, then communication.
CATEGORIES: tuple[str, ...] = (
    "gemm", "moe", "attention", "norm", "elementwise", "cast_quant", "sampling", "memory",
    "other", "allreduce", "all_to_all", "allgather", "reduce_scatter", "other_comm",
)  # fmt: skip
COMM: tuple[str, ...] = ("allreduce", "all_to_all", "allgather", "reduce_scatter", "other_comm")
COMM_SQL = ", ".join(f"'{c}'" for c in COMM)  # for SQL's IN (...): constants, not user values

# Step anatomy: the module that issued a collective.
COMM_SOURCES: tuple[str, ...] = ("attention", "moe", "mlp", "embedding", "logits", "other")

# aten ops that are dtype conversions: a ``direct_copy_kernel_cuda`` they launch is a cast.
CAST_OPS: tuple[str, ...] = (
    "aten::to", "aten::_to_copy", "aten::type_as", "aten::half", "aten::float",
    "aten::bfloat16", "aten::double",
)  # fmt: skip
