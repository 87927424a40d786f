"""Communication cost: latency per collective and world size, and where each curve came from.

``curve`` holds one curve and its range (inside its measured sizes, and how it is extended
outside them); ``rows`` makes curves of the store's rows and the published ones; ``lookup``
picks a host's curve (the one lookup of the planner and the floors) and remembers what an
answer used and did not use (``CommSet``).
"""

from planner.cost.comm.curve import CommCurve, bus_factor, fmt_bytes, wire_factor
from planner.cost.comm.lookup import (
    FAST_ALLREDUCE_SAVING_US,
    FITTED_OPS,
    OPS,
    CommSet,
    NotUsed,
    bind,
    pick,
    same_gpu,
    spec_curve,
    spec_latency,
    unusable,
)
from planner.cost.comm.rows import PUBLISHED, curves_from_rows, normalize_op, published_for

__all__ = ["FAST_ALLREDUCE_SAVING_US", "FITTED_OPS", "OPS", "PUBLISHED", "CommCurve", "CommSet",
           "NotUsed", "bind", "bus_factor", "curves_from_rows", "fmt_bytes", "normalize_op",
           "pick", "published_for", "same_gpu", "spec_curve", "spec_latency", "unusable",
           "wire_factor"]  # fmt: skip
