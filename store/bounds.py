"""What a machine can produce: the one definition of plausible measured values.

The importers refuse a value outside its bound at the door (one line naming the field and the
record), the planner's sanity checks skip or refuse the same values, and ``import`` checks an
exported run's rows against them. Beside ``trace_vocab``: store/ is what the collectors and
the planner both stand on, and this module imports nothing, so an import verb pays nothing.

The bounds are physics and common sense, not fitted figures: a token no GPU serves in under
10 us (a decode step is a chain of kernel launches of a few us each), nobody benchmarks a
server for a month, no clock reads past 2100, no link moves 100 TB/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# 2100-01-01T00:00:00Z: a timestamp past it is no clock's (Kineto's ``ts`` is microseconds
# since the epoch, ``baseTimeNanoseconds`` nanoseconds).
YEAR_2100_S = 4_102_444_800
HOUR_US = 3.6e9


@dataclass(frozen=True)
class Bound:
    """A measured quantity's plausible range; ``zero_ok``: exactly 0 is the tool's "no
    sample" even where ``low`` is above 0 (vLLM writes a TPOT of 0 when no request had two
    tokens)."""

    unit: str
    low: float
    high: float
    why: str  # what makes ``high`` (or ``low``) the edge, in words
    zero_ok: bool = True
    whole: bool = False  # a count

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not a plausible reading (a short phrase), or None."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"is not a number ({_shown(value)})"
        if isinstance(value, float) and math.isnan(value):
            return "is NaN, not a number"
        if isinstance(value, float) and math.isinf(value):
            return f"is {'' if value > 0 else '-'}infinite"
        if value < 0:
            return f"is negative ({self.quantity(value)})"
        if self.whole and value != int(value):
            return f"is not a whole number ({value:g})"
        if value == 0 and self.zero_ok:
            return None
        if value < self.low:
            return f"{self.quantity(value)} is below {self.quantity(self.low)}: {self.why}"
        if value > self.high:
            return f"{self.quantity(value)} is over {self.quantity(self.high)}: {self.why}"
        return None

    def quantity(self, value: float) -> str:
        return f"{value:g} {self.unit}".rstrip()

    def ok(self, value: object) -> bool:
        return self.problem(value) is None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ---- serving benchmarks (milliseconds, seconds, counts) --------------------------------
TOKEN_MS = Bound("ms", 0.01, 3.6e6, "no GPU serves a token in under 10 us, and no benchmark "
                 "waits an hour per token")  # fmt: skip
GAP_MS = Bound("ms", 0.0, 3.6e6, "an hour between two tokens is no serving benchmark")
LATENCY_MS = Bound("ms", 0.0, 8.64e7, "a request that takes over a day is no serving benchmark")
DURATION_S = Bound("s", 0.0, 2.592e6, "nobody benchmarks a server for over 30 days")
REQUESTS = Bound("", 0, 1e9, "a benchmark of over a billion requests", whole=True)
CONCURRENCY = Bound("", 1, 1e7, "no server holds ten million requests at once", whole=True,
                    zero_ok=False)  # fmt: skip
TOKENS = Bound("tokens", 0, 1e15, "more tokens than any benchmark sends", whole=True)
TOKENS_PER_REQUEST = Bound("tokens", 0, 1e8, "no model takes 100 million tokens per request")
REQUEST_RATE = Bound("req/s", 0, 1e7, "ten million requests per second")
TOKEN_RATE = Bound("tok/s", 0, 1e10, "ten billion tokens per second")
PERCENT = Bound("%", 0, 100, "a share is at most 100%")
RATIO = Bound("", 0, 1e6, "a factor this large is no setting")
PARALLEL = Bound("GPUs", 1, 65536, "no deployment spans more GPUs", zero_ok=False, whole=True)

# ---- collectives (nccl-tests, comm) ----------------------------------------------------
COMM_US = Bound("us", 0.0, HOUR_US, "one collective call that lasts an hour")
BANDWIDTH_GBPS = Bound("GB/s", 0.0, 1e5, "no link moves 100 TB/s")
BYTES = Bound("B", 0, 2**62, "more bytes than any GPU holds", whole=True)

# ---- traces (microseconds since the epoch, or since the trace's own start) -------------
KERNEL_US = Bound("us", 0.0, HOUR_US, "no kernel in a profile runs for an hour")
TIMESTAMP_US = Bound("us", 0.0, YEAR_2100_S * 1e6, "a time past the year 2100")
BASE_TIME_NS = Bound("ns", 0.0, YEAR_2100_S * 1e9, "a time past the year 2100")

# ---- expert routing counts --------------------------------------------------------------
ROUTED_TOKENS = Bound("tokens", 0, 1e15, "more tokens than any recording routes")


def check(value: object, bound: Bound, field: str, where: str) -> str | None:
    """One line, ``{where}: {field} {problem}``, when ``value`` is implausible; else None."""
    why = bound.problem(value)
    return None if why is None else f"{where}: {field} {why}"


# ---- stored columns: what `import` checks an exported run's rows against ---------------
def _serving_columns() -> dict[str, Bound]:
    stats = {"ttft": LATENCY_MS, "tpot": TOKEN_MS, "itl": GAP_MS, "e2el": LATENCY_MS}
    out = {f"{s}_{m}_ms": (GAP_MS if s == "std" and m == "tpot" else b)
           for m, b in stats.items() for s in ("mean", "median", "std", "p90", "p99")}
    out.update(duration_s=DURATION_S, num_prompts=REQUESTS, completed=REQUESTS,
               failed=REQUESTS, max_concurrency=CONCURRENCY, total_input_tokens=TOKENS,
               total_output_tokens=TOKENS, request_throughput=REQUEST_RATE,
               output_throughput=TOKEN_RATE, total_token_throughput=TOKEN_RATE,
               tp=PARALLEL, pp=PARALLEL, dp=PARALLEL)
    return out


COLUMNS: dict[str, dict[str, Bound]] = {
    "serving_bench": _serving_columns(),
    "comm_results": {"p50_us": COMM_US, "mean_us": COMM_US, "p10_us": COMM_US,
                     "p90_us": COMM_US, "min_us": COMM_US, "algbw_gbps": BANDWIDTH_GBPS,
                     "busbw_gbps": BANDWIDTH_GBPS, "bytes": BYTES},
    "trace_kernels": {"dur_us": KERNEL_US},
    "trace_steps": {"wall_us": KERNEL_US, "busy_us": KERNEL_US},
}  # fmt: skip
