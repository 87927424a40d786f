"""Step anatomy: which module issued each collective, and MoE kernels inside CUDA graphs.

Both read the kernels in issue order (launch time, then GPU start: a CUDA graph's kernels
share their launch, so the GPU order is theirs) and look at the compute just before.

A collective's source (``store.trace_vocab.COMM_SOURCES``):
- launched inside a MoE or attention CPU op (eager traces): that op; inside the
  vocab-parallel embedding's Python frames (``VocabParallelEmbedding.forward``, with_stack
  traces, taxonomy.EMBEDDING_FRAME): ``embedding``;
- replayed by a CUDA graph (no CPU op runs during a replay), the step's first collective,
  an AllReduce before its first attention kernel: ``embedding`` (the decoder's only
  collective ahead of the first layer's attention is the embedding's);
- else the last distinctive compute before it in the same step: MoE kernels -> ``moe``
  (expert output / combine), attention -> ``attention`` (o_proj output), the embedding
  lookup (a kernel named so, or launched inside ``aten::embedding``) -> ``embedding``; a
  norm, or the previous collective, then GEMMs -> ``mlp`` (dense MLP; with the residual
  norm fused into the AllReduce there is no norm kernel between);
- an AllGather (or gather) after GEMMs with no attention/MoE since the last norm or
  collective is the vocab-parallel ``logits`` gather;
- a collective right after another with no compute between continues its source (two-shot
  AllReduce = ReduceScatter + AllGather, DeepEP dispatch then combine);
- anything else is ``other``.

CUDA graph replays have no MoE CPU op around the launch, so expert GEMMs with generic
names (``bmm_*``, ``nvjet``) would count as dense GEMM: within a graph, a GEMM between two
MoE kernels with only GEMMs and elementwise/cast/copy kernels between is MoE time (those
other kernels keep their category).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from store.trace_vocab import CATEGORIES, COMM, COMM_SOURCES

_CAT = {c: i for i, c in enumerate(CATEGORIES)}
_COMM = np.array([_CAT[c] for c in COMM])
_SRC = {s: i for i, s in enumerate(COMM_SOURCES)}
# an embedding lookup by kernel name; not a rotary embedding (attention's RoPE kernel)
_EMBEDDING = re.compile(r"(?<!rotary_)(?<!rotary)embedding|indexSelect|index_select",
                        re.IGNORECASE)  # fmt: skip
# marker codes
_NONE, _GEMM, _NORM, _ATTN, _MOE, _EMB, _COMM_M = 0, 1, 2, 3, 4, 5, 6
_OWN_SOURCE = {_MOE: "moe", _ATTN: "attention", _EMB: "embedding"}
_MARKER = np.array([{"gemm": _GEMM, "norm": _NORM, "attention": _ATTN, "moe": _MOE}.get(c, _NONE)
                    for c in CATEGORIES], dtype=np.int8)  # fmt: skip
_FILLER = np.array([_CAT[c] for c in ("gemm", "elementwise", "cast_quant", "memory")])


def issue_order(launch: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Event indices in issue order: launch time (GPU start where unknown), then start."""
    key = np.where(np.isnan(launch), start, launch)
    order = np.lexsort((start, key))
    return order.astype(np.int32) if len(order) < 2**31 else order  # half the bytes held


def moe_in_graphs(category: np.ndarray, graph: np.ndarray, order: np.ndarray) -> int:
    """Relabel the GEMMs between two MoE kernels of a graph, with only filler kernels
    between, as MoE; returns how many."""
    sel = order[graph[order]]
    if len(sel) < 3:
        return 0
    cat = category[sel]
    is_moe = cat == _CAT["moe"]
    filler = np.isin(cat, _FILLER)
    pos = np.arange(len(sel))
    last_moe = np.maximum.accumulate(np.where(is_moe, pos, -1))
    last_other = np.maximum.accumulate(np.where(~is_moe & ~filler, pos, -1))
    next_moe = np.minimum.accumulate(np.where(is_moe, pos, len(sel))[::-1])[::-1]
    next_other = np.minimum.accumulate(np.where(~is_moe & ~filler, pos, len(sel))[::-1])[::-1]
    # last_other >= -1 and next_other <= len(sel): a MoE kernel exists on both sides
    inside = (cat == _CAT["gemm"]) & (last_moe > last_other) & (next_moe < next_other)
    category[sel[inside]] = _CAT["moe"]
    return int(inside.sum())


def embedding_names(names: list[str], name: np.ndarray) -> np.ndarray:
    """Whether each event's kernel is named as an embedding lookup."""
    by_name = np.array([bool(_EMBEDDING.search(n)) for n in names], dtype=bool)
    return by_name[name] if len(name) else np.zeros(0, dtype=bool)


@dataclass
class Marks:
    """What the CPU side says about each event, for the anatomy."""

    enclosing: np.ndarray  # category index of the MoE/attention CPU op around the launch, or -1
    in_embedding: np.ndarray  # bool: launched inside the embedding's frames or aten::embedding
    graph: np.ndarray  # bool: replayed by a CUDA/HIP graph
    embedding_name: np.ndarray  # bool: the kernel's name says embedding lookup


def comm_sources(category: np.ndarray, step: np.ndarray, order: np.ndarray,
                 marks: Marks) -> np.ndarray:  # fmt: skip
    """Source index (into COMM_SOURCES) per event; -1 for non-collectives."""
    out = np.full(len(category), -1, dtype=np.int8)
    comm_sel = np.isin(category, _COMM)
    if not comm_sel.any():
        return out
    # int8 markers and int32 positions: a 10-million-event trace's anatomy in tens of MB
    marker = _MARKER[category]
    marker[(marks.embedding_name | marks.in_embedding) & ~comm_sel] = _EMB
    marker[comm_sel] = _COMM_M
    del comm_sel
    m = marker[order]
    del marker
    st = step[order].astype(np.int32, copy=False)
    last_d = _last_before(m, (m != _NONE) & (m != _GEMM))  # last distinctive marker
    last_g = _last_before(m, m == _GEMM)  # and last GEMM, strictly before each position
    allgather = {_CAT["allgather"], _CAT["other_comm"]}
    src_sorted = np.full(len(order), -1, dtype=np.int8)
    enc = marks.enclosing[order]
    cats = category[order]
    first_in_graph = _embedding_by_position(m, st, cats, marks.graph[order])
    emb_frame = marks.in_embedding[order]
    for p in np.flatnonzero(m == _COMM_M):
        e = enc[p]
        if e == _CAT["moe"] or e == _CAT["attention"]:
            src_sorted[p] = _SRC["moe" if e == _CAT["moe"] else "attention"]
            continue
        if emb_frame[p] or first_in_graph[p]:
            src_sorted[p] = _SRC["embedding"]
            continue
        d = last_d[p]
        if d >= 0 and st[d] != st[p]:
            d = -1  # the walk stops at the step boundary
        kind = m[d] if d >= 0 else _NONE
        gemm_after = last_g[p] > d and (d >= 0 or (last_g[p] >= 0 and st[last_g[p]] == st[p]))
        src_sorted[p] = _source(kind, gemm_after, int(cats[p]) in allgather,
                                int(src_sorted[d]) if kind == _COMM_M else -1)  # fmt: skip
    out[order] = src_sorted
    return out


def _last_before(m: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """Per position, the last earlier position where ``hit`` holds (-1: none)."""
    pos = np.where(hit, np.arange(len(m), dtype=np.int32), np.int32(-1))
    out = np.empty_like(pos)
    out[0] = -1
    np.maximum.accumulate(pos[:-1], out=out[1:])
    return out


def _embedding_by_position(m: np.ndarray, st: np.ndarray, cats: np.ndarray,
                           graph: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per issue-order position: a graph-replayed AllReduce that is its step's first
    collective and comes before the step's first attention kernel, with no MoE kernel
    before it (and the step has attention after it)."""
    out = np.zeros(len(m), dtype=bool)
    cand = np.flatnonzero((cats == _CAT["allreduce"]) & graph & (st >= 0))
    if not len(cand):
        return out
    n = int(st.max()) + 1
    inf = len(m)
    first_attn = np.full(n, inf)
    first_comm = np.full(n, inf)
    first_moe = np.full(n, inf)
    for code, first in ((_ATTN, first_attn), (_COMM_M, first_comm), (_MOE, first_moe)):
        sel = np.flatnonzero((m == code) & (st >= 0))
        np.minimum.at(first, st[sel], sel)
    s = st[cand]
    ok = (first_comm[s] == cand) & (cand < first_attn[s]) & (first_attn[s] < inf) & (
        cand < first_moe[s])  # fmt: skip
    out[cand[ok]] = True
    return out


def _source(kind: int, gemm_after: bool, is_gather: bool, previous: int) -> int:
    if kind in _OWN_SOURCE:  # MoE, attention or embedding compute issued it
        return _SRC[_OWN_SOURCE[kind]]
    if is_gather and gemm_after and kind in (_NORM, _COMM_M, _NONE):
        return _SRC["logits"]
    if kind in (_NORM, _COMM_M) and gemm_after:
        return _SRC["mlp"]
    if kind == _COMM_M and not gemm_after and previous >= 0:
        return previous
    return _SRC["other"]
