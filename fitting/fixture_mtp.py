"""Rule 4 of fitting.fixture: the runs of InferenceX's MTP (speculative-decoding) configs.

The silicon sample carries no flag for speculative decoding. InferenceX
(SemiAnalysisAI/InferenceX) sweeps a config when a commit to
``.github/configs/nvidia-master.yaml`` changes it, and a run's ``measured=`` time in the sample
is that commit's author time (2026-02-06T17:21:58Z: 0aae52d4c, authored 09:21:54 -0800). Where
the commit changed only ``*-mtp`` configs of the model, every row of the run is speculative;
where it changed the model's MTP and non-MTP configs together, the points outside the non-MTP
config's search space are speculative, and at points both swept the faster run is (MTP steps
up to 2x faster: 6.70 vs 8.76 ms for DeepSeek-R1 FP8 on SGLang at TP=8, 4 clients).
"""

from __future__ import annotations

from dataclasses import dataclass

from fitting.rows import Row

# The sample lists DeepSeek-R1 runs under DeepSeek-V3 too (same shapes, rule 3).
DEEPSEEK = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")
SweptPoints = dict[tuple[int, int], tuple[tuple[int, int, int], ...]]  # (I, O) -> (tp, C lo, C hi)


@dataclass(frozen=True)
class MtpSweep:
    """One InferenceX run that swept an MTP config, named by the commit that triggered it."""

    engine: str
    models: tuple[str, ...]
    quant: str  # the rows' moe_quant_mode starts with this ("" = any)
    system: str
    day: str  # the sample's measured= (UTC)
    commit: str
    stp: SweptPoints | None = None  # what the non-MTP config swept in the same run, if it ran

    def holds(self, r: Row) -> bool:
        return (r.engine, r.system, r.measured) == (self.engine, self.system, self.day) and (
            r.model_path in self.models and r.quant.startswith(self.quant))

    def stp_swept(self, r: Row) -> bool:
        """Whether the non-MTP config of the same run also measured this row's point."""
        return any(r.layout.tp == tp and r.layout.dp == 1 and lo <= r.concurrency <= hi
                   for tp, lo, hi in (self.stp or {}).get((r.isl, r.osl), ()))  # fmt: skip


SWEEPS = (
    # bf3456727 "Add MTP Benchmark Support for DeepSeek-R1 TRT": adds dsr1-fp4-b200-trt-mtp and
    # dsr1-fp8-b200-trt-mtp only.
    MtpSweep("trtllm", DEEPSEEK, "", "b200_sxm", "2026-01-14", "bf3456727"),
    # 5d517074c "dsr1 fp8 b200 trt agg mtp update": dsr1-fp8-b200-trt-mtp only (release
    # 1.2.0rc6.post3, which no non-MTP config used).
    MtpSweep("trtllm", DEEPSEEK, "fp8", "b200_sxm", "2026-02-05", "5d517074c"),
    # 0aae52d4c "dsr1 fp4 b200 trt agg mtp update": dsr1-fp4-b200-trt-mtp only.
    MtpSweep("trtllm", DEEPSEEK, "nvfp4", "b200_sxm", "2026-02-06", "0aae52d4c"),
    # 35d4bb367 "Add Qwen3.5 FP8 B200 SGLang MTP config": qwen3.5-fp8-b200-sglang-mtp only
    # (TP=4, EP=1; the non-MTP config runs TP=4 with EP=4).
    MtpSweep("sglang", ("Qwen/Qwen3.5-397B-A17B",), "fp8", "b200_sxm", "2026-03-20", "35d4bb367"),
    # 12ba0ae07 "Update DSR1 h200 & b200 sglang image to v0.5.9-cu130": dsr1-fp8-b200-sglang
    # and dsr1-fp8-b200-sglang-mtp (TP=8, 4-512 clients at every length) in one run.
    MtpSweep("sglang", DEEPSEEK, "fp8", "b200_sxm", "2026-03-25", "12ba0ae07",
             stp={(1024, 1024): ((8, 4, 64),), (1024, 8192): ((8, 4, 64),),
                  (8192, 1024): ((8, 4, 4), (4, 4, 32))}),  # fmt: skip
)


def sweep_of(r: Row) -> MtpSweep | None:
    return next((s for s in SWEEPS if s.holds(r)), None)


def split_mtp_runs(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """(the rows less those of MTP runs, those). At a point both configs of one run swept,
    the slowest run stays (its exact repeats too: rule 3 counts them)."""
    out: list[Row] = []
    both: dict[tuple, list[Row]] = {}
    mtp: list[Row] = []
    for r in rows:
        s = sweep_of(r)
        if s is None:
            out.append(r)
        elif s.stp_swept(r):  # R1 and V3 names of one point together
            both.setdefault((s.commit, r.isl, r.osl, r.layout, r.concurrency), []).append(r)
        else:
            mtp.append(r)
    for g in both.values():
        slowest = max(r.tpot_ms for r in g)
        out += [r for r in g if r.tpot_ms >= slowest - 1e-6]
        mtp += [r for r in g if r.tpot_ms < slowest - 1e-6]
    return out, mtp
