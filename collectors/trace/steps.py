"""Step detection: which part of a trace is one decode/training step.

Sources, first found wins:
  1. vLLM ``execute_*`` CPU annotations. New form ``execute_context_{n}({tokens})_
     generation_{m}({tokens})`` (some builds prefix the total, ``execute_{N}_context_...``,
     and put ``sq{q}sk{k}sqsq{qq}sqsk{qk}`` in the brackets: sums over the phase's requests
     of query tokens, KV tokens (new ones included), squared query tokens and query x key
     tokens, as in the real MI300X traces of tests/fixtures/traces/tracelens); old form
     ``execute_new_{n}_cached_{m}`` (request counts only, no token counts).
  2. ``ProfilerStep#N`` (torch.profiler with a schedule).
  3. SGLang's ``step[MODE bs=N]`` ranges (``DECODE``: N sequences, one token each).
  4. vLLM 0.10-0.11 (no step annotation): the ``...gpu_model_runner.py(N): execute_model``
     Python frames (``with_stack``, vLLM's default), outermost ones only.
  5. A CUDA-graph trace with one full-model graph launch per step: from each launch to the
     next (``graph_launch``).
  6. An Nsight Systems export: one step per capture range (``cudaProfilerStart`` to
     ``cudaProfilerStop``, or the whole capture; ``capture_range``).
  7. Otherwise GPU (or, in CPU-only traces, top-level CPU op) idle gaps: a gap longer than
     max(200 us, 20 x the median gap) separates two steps.

Which step owns each GPU event, and each step's GPU window: collectors/trace/windows.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from collectors.trace.npx import unique_sorted

_VLLM_NEW = re.compile(
    r"^execute_(?:\d+_)?context_(?P<cr>\d+)\((?P<ct>[^)]*)\)_generation_(?P<gr>\d+)"
    r"\((?P<gt>[^)]*)\)"
)
_VLLM_OLD = re.compile(r"^execute_new_(?P<new>\d+)_cached_(?P<cached>\d+)")
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_SGLANG = re.compile(r"^step\[[A-Za-z_]+[^\]]*\]$")
_SQ = re.compile(r"sq(\d+)")
_DETAIL = re.compile(r"^sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)$")
_SGLANG_BS = re.compile(r"^step\[(?P<mode>[A-Za-z_]+)\b[^\]]*?\bbs=(?P<bs>\d+)")

MIN_GAP_US = 200.0
GAP_FACTOR = 20.0


@dataclass
class Step:
    name: str
    source: str  # vllm, vllm_execute_model, graph_launch, profiler_step, sglang,
    # capture_range or gap
    cpu_start: float  # us, absolute trace time
    cpu_end: float
    context_tokens: int | None = None
    generation_tokens: int | None = None
    context_requests: int | None = None
    generation_requests: int | None = None
    # vLLM's detailed form only (migration 0014): KV tokens the phase's requests read (their
    # contexts, new tokens included) and the prompt tokens' causal query-key pairs.
    context_kv_tokens: int | None = None
    generation_kv_tokens: int | None = None
    context_attended: int | None = None


def _tokens(text: str) -> int | None:
    """Token count inside vLLM's brackets: ``37`` or ``sq37sk34489...``."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    m = _SQ.match(text)
    return int(m.group(1)) if m else None


def _detail(text: str) -> tuple[int, int, int, int] | None:
    """(sq, sk, sqsq, sqsk) of vLLM's detailed brackets, or None."""
    m = _DETAIL.match(text.strip())
    return (int(m[1]), int(m[2]), int(m[3]), int(m[4])) if m else None


def _vllm(name: str, ts: float, dur: float) -> Step | None:
    m = _VLLM_NEW.match(name)
    if m:
        ctx, gen = _detail(m["ct"]), _detail(m["gt"])
        return Step(name, "vllm", ts, ts + dur,
                    context_tokens=_tokens(m["ct"]), generation_tokens=_tokens(m["gt"]),
                    context_requests=int(m["cr"]), generation_requests=int(m["gr"]),
                    context_kv_tokens=ctx[1] if ctx else None,
                    generation_kv_tokens=gen[1] if gen else None,
                    # a prompt of q new tokens after c cached ones: token j attends c + j + 1
                    # keys, q (c + q) - q (q - 1) / 2 in all: sqsk - (sqsq - sq) / 2 summed
                    context_attended=ctx[3] - (ctx[2] - ctx[0]) // 2 if ctx else None)  # fmt: skip
    m = _VLLM_OLD.match(name)
    if m:
        return Step(name, "vllm", ts, ts + dur,
                    context_requests=int(m["new"]), generation_requests=int(m["cached"]))  # fmt: skip
    return None


def annotated_steps(cpu_annotations: list[tuple[str, float, float, object]]) -> list[Step]:
    """Steps from annotations (sources 1-3), sorted by CPU start; [] when none."""
    found = [s for name, ts, dur, _tid in cpu_annotations if (s := _vllm(name, ts, dur))]
    if not found:
        for source, rx in (("profiler_step", _PROFILER_STEP), ("sglang", _SGLANG)):
            found = [_sglang_batch(Step(n, source, ts, ts + d))
                     for n, ts, d, _ in cpu_annotations if rx.match(n)]  # fmt: skip
            if found:
                break
    found.sort(key=lambda s: s.cpu_start)
    return found


def _sglang_batch(step: Step) -> Step:
    """SGLang's ``step[DECODE bs=32]``: 32 decode sequences, one token each."""
    m = _SGLANG_BS.match(step.name)
    if step.source == "sglang" and m and m["mode"].upper() == "DECODE":
        step.generation_requests = step.generation_tokens = int(m["bs"])
    return step


def gap_steps(start: np.ndarray, end: np.ndarray) -> list[Step]:
    """Steps split at long idle gaps of the merged busy intervals (already a union)."""
    if not len(start):
        return []
    gaps = start[1:] - end[:-1]
    positive = gaps[gaps > 0]
    # the median's partition in place: no third copy of a 10-million-gap array
    median = float(np.median(positive, overwrite_input=True)) if len(positive) else 0.0
    some = len(positive) > 0
    del positive
    threshold = max(MIN_GAP_US, GAP_FACTOR * median) if some else 0
    cuts = np.flatnonzero(gaps > threshold) if some else np.zeros(0, dtype=int)
    del gaps
    firsts = np.r_[0, cuts + 1]
    lasts = np.r_[cuts, len(start) - 1]
    return [Step(f"gap#{i}", "gap", float(start[a]), float(end[b]))
            for i, (a, b) in enumerate(zip(firsts, lasts, strict=True))]


def frame_steps(frames: list[tuple[str, float, float, object]]) -> list[Step]:
    """Steps from vLLM's ``execute_model`` Python frames: the outermost of nested ones
    (``gpu_worker.execute_model`` wraps ``gpu_model_runner.execute_model``)."""
    frames = sorted(frames, key=lambda f: (f[1], -f[2]))
    out: list[Step] = []
    for name, ts, dur, _tid in frames:
        if out and ts < out[-1].cpu_end:
            continue  # nested in the previous one
        out.append(Step(name, "vllm_execute_model", ts, ts + dur))
    return out


def graph_launch_steps(launch_ts: np.ndarray, last_cpu: float) -> list[Step]:
    """One step per full-model graph launch: from a launch to the next (the inputs copied
    before a launch land in the previous step; the sampler after it in this one)."""
    ts = unique_sorted(launch_ts)
    ends = np.r_[ts[1:], max(last_cpu, float(ts[-1]) + 1.0)] if len(ts) else ts
    return [Step(f"graph#{i}", "graph_launch", float(a), float(b))
            for i, (a, b) in enumerate(zip(ts, ends, strict=True))]


def capture_steps(ranges: list[tuple[float, float]], first: float, last: float) -> list[Step]:
    """One step per capture range of an nsys report; an open end (NaN) is the capture's
    first or last event time."""
    spans = sorted((first if np.isnan(a) else a, last if np.isnan(b) else b) for a, b in ranges)
    return [Step(f"capture#{i}", "capture_range", float(a), float(b))
            for i, (a, b) in enumerate(spans) if b >= a]
