"""Read SGLang's expert distribution recorder outputs into layers x logical-expert counts.

Formats, from sgl-project/sglang python/sglang/srt/eplb/expert_distribution.py @ 02295fe5
(``_StatAccumulator.dump``, ``_DetailAccumulator.dump``, ``_dump_to_file``) and
expert_location.py @ 01fec5c2 (``compute_initial_expert_location_metadata``):

- ``--expert-distribution-recorder-mode stat`` (and ``stat_approx``, which gathers its
  counts from DeepEP's dispatch instead but dumps the same way): rank 0 writes
  ``expert_distribution_recorder_{time}.pt``, ``torch.save`` of ``{"rank", "logical_count":
  int tensor [buffered passes, layers, logical experts], "average_utilization_rate_over_window":
  float or None}``; the counts are already summed over ranks (an all-reduce).
- ``per_pass`` / ``per_token``: every rank writes ``expert_distribution_recorder_{time}_{rank}
  .pt``: ``{"records": [{"forward_pass_id", "rank", "gatherer_key", "global_physical_count":
  [layers, physical experts], ...}], "last_physical_to_logical_map": [layers, physical]}``;
  per_token records add ``input_ids``, ``positions``, ``extend_seq_lens``, ``forward_mode``,
  ``topk_ids_of_layer``, ``misc_objects``. Counts are summed over records and files (SGLang's
  own reader, eplb_simulator/reader.py, sums over ranks) and mapped to logical experts with
  the map, as ``_convert_global_physical_count_to_logical_count`` does. The map is the one
  in force at the dump ("may change during recording" under EPLB).
- The JSON ``--init-expert-location`` reads: ``{"logical_count": [layers][experts]}`` (a 3-D
  list is summed over its first axis, as ``init_by_eplb`` accepts). A file holding only
  ``physical_to_logical_map`` is a placement, not counts.

Layers without routed experts (DeepSeek's first dense layers) hold zeros. Every count is
multiplied by the ranks that saw the same tokens (TP ranks all count them): ratios, the only
thing used here, do not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from collectors.core import inputs
from collectors.core.errors import InputError
from store import bounds

# The JSON form is layers x experts (61 x 384 counts: ~200 KB); parsed, a JSON of numbers
# takes about five times its size, so 64 MiB keeps the read well under 1 GiB.
MAX_JSON_BYTES = 64 * inputs.MiB
LEGACY_MAX_BYTES = inputs.GiB  # a pre-zip torch.save file cannot be memory-mapped
# No MoE model has this many experts: a map naming more is no placement (and would allocate
# a counts array of that width)
MAX_EXPERTS = 100_000


@dataclass
class Recording:
    """What one or more recorder files hold, summed."""

    counts: np.ndarray  # (layers, logical experts)
    mode: str  # stat | per_pass | per_token | logical_count (the JSON form)
    files: list[str] = field(default_factory=list)
    forward_passes: int | None = None  # per_pass / per_token records
    ranks: list[int] = field(default_factory=list)  # ranks whose records were read
    physical_to_logical: np.ndarray | None = None  # (layers, physical slots) in force


def read(paths: list[Path]) -> Recording:
    """Every file, summed into one recording; InputError (one line) for what does not fit.
    A file named twice (or under two names) counts once."""
    paths = inputs.unique(paths)
    parts = [read_one(p) for p in paths]
    first = parts[0]
    for p, part in zip(paths[1:], parts[1:], strict=True):
        if part.counts.shape != first.counts.shape:
            raise InputError(f"{p}: {_shape(part.counts)}, but {paths[0]} is "
                             f"{_shape(first.counts)}: not the same model")  # fmt: skip
        if (part.mode == "logical_count") != (first.mode == "logical_count"):
            raise InputError(f"{p}: a {part.mode} file beside a {first.mode} one; import each "
                             "recording on its own")  # fmt: skip
    counts = np.sum([part.counts for part in parts], axis=0)
    passes = [part.forward_passes for part in parts if part.forward_passes is not None]
    maps = [part.physical_to_logical for part in parts if part.physical_to_logical is not None]
    modes = sorted({part.mode for part in parts})
    return Recording(counts, "+".join(modes), [str(p) for p in paths],
                     max(passes) if passes else None,
                     sorted({r for part in parts for r in part.ranks}),
                     maps[0] if maps else None)  # fmt: skip


def read_one(path: Path) -> Recording:
    st = inputs.check_file(path, "a recorder dump")
    if st.st_size == 0:
        raise InputError(f"{path}: the file is empty")
    if path.suffix == ".pt":
        return _from_dump(path, torch_load(path))
    text = inputs.read_text(path, MAX_JSON_BYTES, "an expert distribution JSON")
    try:
        data = inputs.parse_json(text, path)
    except inputs.TooDeep:
        raise
    except InputError as exc:
        if "EPLB step:" in text:  # vllm/distributed/eplb/eplb_state.py EplbState.step's line
            raise InputError(f"{path}: a vLLM log; vLLM's EPLB logs balancedness summed over "
                             "layers, no per-expert counts to import (docs/expert-load.md)") from None  # fmt: skip
        raise InputError(f"{exc}; give a .pt dump or the JSON {{\"logical_count\": "
                         "[layers][experts]} form") from None  # fmt: skip
    if not isinstance(data, dict) or "logical_count" not in data:
        if isinstance(data, dict) and "physical_to_logical_map" in data:
            raise InputError(f"{path}: a placement map (physical_to_logical_map), not counts; "
                             "give it with --placement")  # fmt: skip
        raise InputError(f"{path}: no logical_count: not SGLang's expert distribution JSON "
                         "({\"logical_count\": [layers][experts]})")  # fmt: skip
    return Recording(_counts(path, data["logical_count"]), "logical_count", [str(path)])


def torch_load(path: Path) -> Any:
    """``torch.load`` with ``weights_only`` (no code runs) and ``mmap`` (tensors stay in the
    file's pages, so a dump of any size is read in its size plus little memory); a dump in
    the legacy (not zip) format of at most LEGACY_MAX_BYTES is read whole."""
    st = inputs.check_file(path, "a recorder dump")
    if st.st_size == 0:
        raise InputError(f"{path}: the file is empty")
    try:
        import torch
    except ImportError:
        raise InputError(f"{path}: reading a .pt dump needs torch, which is not installed here; "
                         "install it, or give the JSON logical_count form") from None  # fmt: skip
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc) or st.st_size > LEGACY_MAX_BYTES:
                raise
            return torch.load(path, map_location="cpu", weights_only=True)  # legacy format
    except Exception as exc:  # torch raises many kinds for a file that is not its own
        raise InputError(f"{path}: torch.load(weights_only=True) cannot read it "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})") from None  # fmt: skip


def _from_dump(path: Path, data: Any) -> Recording:
    if isinstance(data, dict) and "logical_count" in data:
        return Recording(_counts(path, data["logical_count"]), "stat", [str(path)])
    if isinstance(data, dict) and isinstance(data.get("records"), list) and (
            "last_physical_to_logical_map" in data):  # fmt: skip
        return _from_records(path, data["records"], data["last_physical_to_logical_map"])
    if isinstance(data, dict) and "physical_to_logical_map" in data:
        raise InputError(f"{path}: a placement map (physical_to_logical_map), not counts; "
                         "give it with --placement")  # fmt: skip
    raise InputError(f"{path}: neither logical_count nor records in it: not an SGLang expert "
                     "distribution dump")  # fmt: skip


def _from_records(path: Path, records: list, phys_map: Any) -> Recording:
    mapping = _array(path, phys_map, "last_physical_to_logical_map", integer=True)
    if mapping.ndim != 2 or 0 in mapping.shape:
        raise InputError(f"{path}: last_physical_to_logical_map is {mapping.ndim}-D "
                         f"{list(mapping.shape)}, not layers x physical experts")  # fmt: skip
    if not records:
        raise InputError(f"{path}: no records: the recorder saw no forward pass (was load sent "
                         "between start and dump?)")  # fmt: skip
    check_map(path, mapping, "last_physical_to_logical_map")
    physical = np.zeros(mapping.shape)
    passes, ranks, detail = set(), set(), False
    for i, rec in enumerate(records):  # one record at a time: a dump's pages are read once
        if not isinstance(rec, dict) or "global_physical_count" not in rec:
            raise InputError(f"{path}: record {i} has no global_physical_count")
        gpc = _array(path, rec["global_physical_count"], f"record {i} global_physical_count")
        if gpc.shape != mapping.shape:
            raise InputError(f"{path}: record {i} counts {_shape(gpc)} physical experts but the "
                             f"map is {_shape(mapping)}")  # fmt: skip
        physical += gpc
        passes.add(_scalar(path, rec.get("forward_pass_id", i), f"record {i} forward_pass_id"))
        if rec.get("rank") is not None:
            ranks.add(int(_scalar(path, rec["rank"], f"record {i} rank")))
        detail = detail or "topk_ids_of_layer" in rec
    if why := bounds.check(float(physical.sum()), bounds.ROUTED_TOKENS, "the summed counts",
                           str(path)):  # fmt: skip
        raise InputError(why)
    logical = np.zeros((mapping.shape[0], int(mapping.max()) + 1))
    rows = np.broadcast_to(np.arange(mapping.shape[0])[:, None], mapping.shape)
    np.add.at(logical, (rows, mapping), physical)
    return Recording(logical, "per_token" if detail else "per_pass", [str(path)], len(passes),
                     sorted(ranks), mapping)  # fmt: skip


def check_map(path: Path, mapping: np.ndarray, what: str) -> None:
    """Expert ids of a placement map: 0 and up, fewer than any model's experts."""
    if mapping.min() < 0:
        raise InputError(f"{path}: {what} has a negative expert id")
    if mapping.max() >= MAX_EXPERTS:
        raise InputError(f"{path}: {what} names expert {int(mapping.max())}: no model has "
                         f"{MAX_EXPERTS:,} experts")  # fmt: skip


def _scalar(path: Path, value: Any, what: str) -> float:
    """A record's id or rank: a whole number (a one-element tensor too)."""
    if hasattr(value, "item") and getattr(value, "numel", lambda: 1)() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InputError(f"{path}: {what} {str(value)[:40]!r} is not a whole number")
    return value


def _array(path: Path, value: Any, what: str, integer: bool = False) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=np.int64 if integer else float)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}: {what} is not a rectangular array of numbers") from None
    if not integer and (not np.all(np.isfinite(arr)) or (arr < 0).any()):
        raise InputError(f"{path}: {what} holds a negative or non-finite count")
    return arr


def _counts(path: Path, value: Any) -> np.ndarray:
    arr = _array(path, value, "logical_count")
    if arr.ndim == 3:  # [buffered passes, layers, experts], as the stat recorder keeps it
        arr = arr.sum(axis=0)
    if arr.ndim != 2 or 0 in arr.shape:
        raise InputError(f"{path}: logical_count is {arr.ndim}-D {list(arr.shape)}, not "
                         "layers x experts")  # fmt: skip
    return arr


def _shape(arr: np.ndarray) -> str:
    return f"{arr.shape[0]} layers x {arr.shape[1]}"
