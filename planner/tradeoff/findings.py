"""Sentences a user should read before running an experiment, computed from a plan."""

from __future__ import annotations

import numpy as np

from planner.tradeoff.types import LayoutResult, PlanResult


def find(res: PlanResult, kind: str, **attrs: object) -> LayoutResult | None:
    for r in res.layouts:
        if r.layout.kind == kind and all(getattr(r.layout, k) == v for k, v in attrs.items()):
            return r
    return None


def findings(res: PlanResult) -> list[str]:
    out = []
    for sentence in (vllm_vs_writeup(res), capacity(res), *hypotheses(res)):
        if sentence:
            out.append(sentence)
    return out


def vllm_vs_writeup(res: PlanResult) -> str:
    """Where vLLM's real EP layouts differ from the write-up's TP-attention + EP-MoE estimate."""
    n, m = res.hardware.gpu_count, res.model
    tp = find(res, "tp")
    if tp is None or not m.num_experts or n < 2 or tp.curve.why_not:
        return ""
    at = tp.curve.at(1)
    parts = []
    tpep = find(res, "tp_ep_dp1")
    if tpep is not None:
        parts.append(f"TP={n} + EP with DP=1 keeps all {tpep.curve.allreduce_calls} AllReduces "
                     f"({tpep.curve.terms['allreduce'][at]:.2f} ms per step at concurrency 1, "
                     f"the same as TP={n}: it removes none)")  # fmt: skip
    est = find(res, "tp_attn_ep_moe")
    if est is not None and not est.curve.why_not:
        saved = tp.curve.terms["allreduce"][at] - est.curve.terms["allreduce"][at]
        parts.append(f"the write-up's estimate (TP attention + EP MoE: {saved:.2f} ms of MoE "
                     f"AllReduce replaced by {est.curve.terms['all_to_all'][at]:.2f} ms of "
                     f"all-to-all) has no vLLM layout at DP=1")  # fmt: skip
    dp = find(res, "dp_attn_ep", a2a_backend="allgather_reducescatter")
    if dp is not None:
        what = (f"it does not even fit: {dp.curve.weights_per_gpu_bytes / 1e9:.1f} GB of "
                "weights per GPU" if dp.curve.why_not else
                f"{dp.curve.tpot_ms[at]:.2f} ms TPOT at concurrency 1 vs "
                f"{tp.curve.tpot_ms[at]:.2f} ms for TP={n}")  # fmt: skip
        parts.append(f"vLLM's real EP layout, DP={n} attention + EP, replicates "
                     f"{m.nonexpert_bytes() / 1e9:.1f} GB of attention, shared-expert and "
                     "embedding weights on every GPU and reads them every step, and idle DP "
                     f"ranks run dummy passes: {what}")  # fmt: skip
    return ("Where vLLM differs from the write-up's estimate: " + "; ".join(parts) + ".") if (
        parts) else ""  # fmt: skip


def _max_fit(res: PlanResult, compliant: bool) -> tuple[int, str]:
    best, name = 0, ""
    for r in res.layouts:
        if r.compliant != compliant or not r.curve.fits.any():
            continue
        c = int(res.concurrency[np.nonzero(r.curve.fits)[0][-1]])
        if c > best:
            best, name = c, r.layout.name
    return best, name


def capacity(res: PlanResult) -> str:
    """The policy's cost in memory: how far compliant layouts fit vs blocked ones."""
    ok, ok_name = _max_fit(res, True)
    bad, bad_name = _max_fit(res, False)
    ctx = f"{res.isl} in / {res.osl} out"
    if bad > ok:
        where = f"up to concurrency {ok} ({ok_name})" if ok else "at no concurrency"
        return (f"Capacity: compliant layouts run every request at once {where}; {bad_name} "
                f"would up to {bad} - the policy costs that capacity at {ctx}.")  # fmt: skip
    if ok and ok < int(res.concurrency[-1]):
        return f"Capacity: nothing compliant fits above concurrency {ok} ({ok_name})."
    return ""


def hypotheses(res: PlanResult) -> list[str]:
    """One sentence per compliant layout resting on a collective nobody measured here."""
    out = []
    for r in res.layouts:
        if not (r.compliant and r.hypothesis) or r.curve.why_not:
            continue
        what = "; ".join(f"{c.op} on {c.world_size} GPUs from a {c.kind} curve ({c.source})"
                         for c in r.unmeasured)  # fmt: skip
        j = r.curve.at(1)
        out.append(f"Hypothesis, not a recommendation: {r.layout.name} "
                   f"({r.curve.tpot_ms[j]:.2f} ms TPOT at concurrency 1) rests on {what}, "
                   f"not measured on this host; measure it: `{'`; `'.join(r.measure)}`.")  # fmt: skip
    return out
