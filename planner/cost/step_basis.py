"""One step's time, split into what each fitted parameter multiplies.

planner.cost.step_ops gives a step's ops (their bytes, FLOPs, kernels, routed experts);
planner.cost.step prices them. The price of an op is its roofline (bytes over achieved
bandwidth, FLOPs over achieved tensor peak) plus its kernels' floors plus, for the routed
experts, a grouped-GEMM overhead per expert. Everything but the achieved fractions is fixed
by the model, the host and the step's shape; so :class:`StepBasis` keeps those parts at unit
efficiency and :meth:`StepBasis.terms` applies the parameters. ``predict`` builds a basis per
priced step shape and evaluates it once; the fit builds one basis for every step shape of
every fixture row and evaluates it for each candidate set of parameters
(:meth:`StepBasis.concat`), which is what makes a fit over simulated schedules fast. One
price either way: this module is the only place a step's time is assembled.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from planner.cost.params import EAGER_LAUNCH_US, FORMAT_BW, ServingParams
from planner.cost.step_ops import StepOp, native_format, peak

# Slots of the decode ops: each is priced the same way and files under one term.
SLOTS = ("attention", "kv_cache", "dense", "routed_mean", "routed_top", "shared", "lm_head")
TERM_OF = {"attention": "attention", "kv_cache": "kv_cache", "dense": "mlp", "shared": "mlp",
           "lm_head": "lm_head"}  # fmt: skip
COMPUTE = ("attention", "kv_cache", "mlp", "experts", "expert_imbalance", "lm_head")


@dataclass
class StepBasis:
    """Per step shape, at unit efficiencies: bytes time (ms at bw_eff = 1), FLOPs time (ms
    at mfu = 1), kernels and routed expert-layers per slot; the prompt tokens' compute (ms
    at mfu = 1, moe_mfu = 1); the collectives (ms at calibration scale 1); the decode batch
    and the model's layers (per-sequence work) and which engine runs it (engine-specific
    parameters)."""

    bytes_ms: np.ndarray  # (slots, shapes)
    flops_ms: np.ndarray  # (slots, shapes)
    kernels: np.ndarray  # (slots, shapes)
    expert_layers: np.ndarray  # (2, shapes): routed_mean, routed_top
    shared_overlap: np.ndarray  # the shared expert runs beside the routed ones
    prefill_attention_ms: np.ndarray
    prefill_expert_ms: np.ndarray
    allreduce_ms: np.ndarray
    all_to_all_ms: np.ndarray
    batch: np.ndarray
    layers: np.ndarray  # the model's layers (a sequence's per-step work is per layer)
    prompt_only: np.ndarray  # a step with prompt tokens and no decoding request
    engine: np.ndarray  # index into ``engines``
    engines: tuple[str, ...]
    eager_us: float = 0.0  # per kernel, without CUDA graphs

    @staticmethod
    def concat(bases: list[StepBasis]) -> StepBasis:
        """Many bases as one (their shapes side by side), for one evaluation of all."""
        names = tuple(dict.fromkeys(e for b in bases for e in b.engines))
        if len({b.eager_us for b in bases}) > 1:
            raise ValueError("bases with and without CUDA graphs cannot be evaluated together")
        vals = {}
        for f in fields(StepBasis):
            if f.name in ("engines", "eager_us"):
                continue
            if f.name == "engine":
                vals[f.name] = np.concatenate(
                    [np.asarray([names.index(b.engines[i]) for i in b.engine]) for b in bases])
            else:
                vals[f.name] = np.concatenate([getattr(b, f.name) for b in bases], axis=-1)
        return StepBasis(**vals, engines=names, eager_us=bases[0].eager_us)

    def _per_engine(self, table: dict[str, float], default: float) -> np.ndarray:
        return np.asarray([table.get(e, default) for e in self.engines])[self.engine]

    def terms(self, p: ServingParams) -> dict[str, np.ndarray]:
        """Milliseconds of each term of one step of each shape."""
        floor_ms = (p.kernel_us * self._per_engine(p.engine_kernel, 1.0) + self.eager_us) / 1e3
        moe_eff = np.array([1.0, 1.0, 1.0, p.moe_eff, p.moe_eff, 1.0, 1.0])[:, None]
        roof = np.maximum(self.bytes_ms / (p.bw_eff * moe_eff), self.flops_ms / p.mfu)
        slot = dict(zip(SLOTS, roof + self.kernels * floor_ms, strict=True))
        expert_ms = self.expert_layers * p.expert_us / 1e3
        mean = slot["routed_mean"] + expert_ms[0]
        imbalance = (roof[SLOTS.index("routed_top")] - roof[SLOTS.index("routed_mean")]
                     + expert_ms[1] - expert_ms[0])  # the busiest rank's over the mean's
        # The shared expert's kernel floors hide behind the routed experts' time (a second
        # stream, planner.specs.engines.Engine.shared_overlap_tokens); its bytes do not.
        shared_floor = self.kernels[SLOTS.index("shared")] * floor_ms
        hidden = np.where(self.shared_overlap, np.minimum(shared_floor, mean + imbalance), 0.0)
        # each decoding sequence's own work (its attention blocks, its sampling row)
        per_seq = (np.where(self.prompt_only, 0.0, self.batch) * self.layers
                   * self._per_engine(p.seq_us, 0.0) / 1e3)  # fmt: skip
        out = {"attention": slot["attention"], "kv_cache": slot["kv_cache"] + per_seq,
               "mlp": slot["dense"] + slot["shared"] - hidden, "experts": mean,
               "expert_imbalance": imbalance, "lm_head": slot["lm_head"]}  # fmt: skip
        scale = p.compute_scale
        prefill = (self.prefill_attention_ms / p.mfu + self.prefill_expert_ms / p.moe_mfu) * scale
        for t in COMPUTE:
            v = out[t] * scale
            prefill = prefill + np.where(self.prompt_only, v, 0.0)
            out[t] = np.where(self.prompt_only, 0.0, v)
        out["prefill"] = prefill
        out["allreduce"] = self.allreduce_ms * p.allreduce_scale
        out["all_to_all"] = self.all_to_all_ms * p.a2a_scale
        return out


def op_slot(op: StepOp) -> str:
    if op.experts is not None:
        return "routed"
    if op.overlaps_experts:
        return "shared"
    return {"mlp": "dense"}.get(op.term, op.term)


def unit_roof(op: StepOp, bw_bytes_per_s: float, hw, activations: str,
              nbytes=None, flops=None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(bytes ms at bw_eff = 1, FLOPs ms at mfu = 1) of an op (or of ``nbytes`` / ``flops``
    of its family)."""
    fmt = FORMAT_BW[(op.family, native_format(op.family, hw))]
    b = op.nbytes if nbytes is None else nbytes
    f = op.flops if flops is None else flops
    return (np.asarray(b / (bw_bytes_per_s * fmt) * 1e3, dtype=float),
            np.asarray(f / peak(op.family, hw, activations) * 1e3, dtype=float))  # fmt: skip


def eager_us(cuda_graphs: bool) -> float:
    return 0.0 if cuda_graphs else EAGER_LAUNCH_US
