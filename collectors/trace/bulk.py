"""Bulk extraction of the common event layout, without a dict per event.

Kineto (and ``json.dumps`` of its events) writes every complete event as ``"ph": "X",
"cat": ..., "name": ..., "pid": ..., "tid": ..., "ts": ..., "dur": ..., "args": {...}``.
For CPU ops, runtime calls and GPU activity one ``findall`` per chunk returns exactly the
fields we keep, as bytes, in C; the values are converted in bulk. The reader counts each
category separately and only trusts a bulk result whose count matches: an event in any
other layout sends its whole category back to the per-event parser for that chunk.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from collectors.trace.columns import Sink

_NUM = rb"(-?[0-9.eE+-]+)"
_STR = rb'"([^"\\]*(?:\\.[^"\\]*)*)"'  # a JSON string's body, escapes included
_TAIL = (
    rb'\s*,\s*"pid"\s*:\s*(?:-?\d+|"[^"]*")\s*,\s*"tid"\s*:\s*(-?\d+|"[^"]*")\s*,\s*'
    rb'"ts"\s*:\s*' + _NUM + rb'\s*,\s*"dur"\s*:\s*' + _NUM
)  # fmt: skip
_ARGS = rb'\s*,\s*"args"\s*:\s*\{([^{}]*)\}'


def _patterns(cat: bytes, args: bool) -> tuple[re.Pattern, re.Pattern]:
    """(exact Kineto spacing: a literal prefix the regex engine skips to fast, any spacing).

    Every event in these categories is a complete ("X") event, so "ph" is not checked.
    """
    tail = _TAIL + (_ARGS if args else b"")
    exact = re.compile(b'"cat": "' + cat + b'", "name": ' + _STR + tail)
    loose = re.compile(rb'"cat"\s*:\s*"' + cat + rb'"\s*,\s*"name"\s*:\s*' + _STR + tail)
    return exact, loose


COUNT = re.compile(rb'"cat"\s*:\s*"(cpu_op|cuda_runtime|cuda_driver|kernel|gpu_memcpy|gpu_memset)"')
# group -> its categories, with their patterns; rows are (name, tid, ts, dur[, args])
GROUPS: dict[str, tuple[tuple[bytes, tuple[re.Pattern, re.Pattern]], ...]] = {
    "cpu": ((b"cpu_op", _patterns(b"cpu_op", False)),),
    "runtime": tuple((c, _patterns(c, True)) for c in (b"cuda_runtime", b"cuda_driver")),
    "gpu": tuple((c, _patterns(c, True)) for c in (b"kernel", b"gpu_memcpy", b"gpu_memset")),
}
_CORR = re.compile(rb'"correlation"\s*:\s*(\d+)')
_STREAM = re.compile(rb'"stream"\s*:\s*(\d+)')
_KIND = {b"kernel": 0, b"gpu_memcpy": 1, b"gpu_memset": 2}


def extract(sink: Sink, buf: bytes, stop: int) -> set[bytes]:
    """Take every event of buf[:stop] in the common layout; return the categories done."""
    counts = Counter(COUNT.findall(buf, 0, stop))
    done: set[bytes] = set()
    for group, cats in GROUPS.items():
        rows: list[tuple] = []
        kinds: list[int] = []
        for cat, patterns in cats:
            if not counts[cat]:
                continue
            for rx in patterns:  # exact spacing first, then any spacing
                found = rx.findall(buf, 0, stop)
                if len(found) == counts[cat]:
                    break
            else:
                break  # some event has another layout: this group goes per event
            rows += found
            kinds += [_KIND.get(cat, 0)] * len(found)
        else:
            if not rows or _ADD[group](sink, rows, kinds):
                done.update(c for c, _ in cats)
    return done


def _floats(rows: list[tuple], ts_at: int) -> tuple[list[float], list[float]] | None:
    ts = [float(r[ts_at]) for r in rows]
    dur = [float(r[ts_at + 1]) for r in rows]
    return None if min(dur) < 0 else (ts, dur)  # a negative one is reported per event


def _name_ids(sink: Sink, names: Any) -> list[int]:
    ids = sink.bytes_ids
    for b in set(names) - ids.keys():
        ids[b] = sink.name_id(b.decode() if b"\\" not in b else _json_string(b))
    return [ids[b] for b in names]


def _tid_ids(sink: Sink, tids: Any) -> list[int]:
    known = sink.tid_bytes
    for b in set(tids) - known.keys():
        tid: Any = int(b) if b[:1] != b'"' else b[1:-1].decode()
        t = sink.tid_ids.get(tid)
        if t is None:
            t = sink.tid_ids[tid] = len(sink.tid_ids)
            sink.raw.tids.append(tid)
        known[b] = t
    return [known[b] for b in tids]


def _add_cpu(sink: Sink, rows: list[tuple], _kinds: list[int]) -> bool:
    vals = _floats(rows, 2)
    if vals is None:
        return False
    names, tids, _ts, _dur = zip(*rows, strict=True)
    raw = sink.raw
    raw.c_ts.extend(vals[0])
    raw.c_dur.extend(vals[1])
    raw.c_tid.extend(_tid_ids(sink, tids))
    raw.c_name.extend(_name_ids(sink, names))
    raw.events_kept += len(rows)
    return True


def _add_runtime(sink: Sink, rows: list[tuple], _kinds: list[int]) -> bool:
    vals = _floats(rows, 2)
    if vals is None:
        return False
    corr_search = _CORR.search
    for r, ts in zip(rows, vals[0], strict=True):
        m = corr_search(r[4])
        if m is not None:
            sink.raw.r_corr.append(int(m.group(1)))
            sink.raw.r_ts.append(ts)
    sink.raw.events_kept += len(rows)
    return True


def _add_gpu(sink: Sink, rows: list[tuple], kinds: list[int]) -> bool:
    vals = _floats(rows, 2)
    if vals is None:
        return False
    names, tids, _ts, _dur, args = zip(*rows, strict=True)
    name_ids = _name_ids(sink, names)
    corr_search, stream_search = _CORR.search, _STREAM.search
    raw = sink.raw
    streams, corrs, colls, dtypes = [], [], [], []
    for tid, a in zip(tids, args, strict=True):
        m = stream_search(a)
        streams.append(int(m.group(1)) if m else _int_or(tid))
        m = corr_search(a)
        corrs.append(int(m.group(1)) if m else -1)
        coll = dtype = -1
        if b'"Collective name"' in a or b'"dtype"' in a:
            parsed = _json_object(a)
            if parsed.get("Collective name") is not None:
                coll = sink.name_id(str(parsed["Collective name"]))
            if parsed.get("dtype") is not None:
                dtype = sink.name_id(str(parsed["dtype"]))
        colls.append(coll)
        dtypes.append(dtype)
    raw.g_kind.extend(kinds)
    raw.g_ts.extend(vals[0])
    raw.g_dur.extend(vals[1])
    raw.g_stream.extend(streams)
    raw.g_name.extend(name_ids)
    raw.g_corr.extend(corrs)
    raw.g_coll.extend(colls)
    raw.g_dtype.extend(dtypes)
    raw.events_kept += len(rows)
    return True


_ADD = {"cpu": _add_cpu, "runtime": _add_runtime, "gpu": _add_gpu}


def _int_or(tid: bytes) -> int:
    digits = re.search(rb"\d+", tid)
    return int(digits.group()) if digits else -1


def _json_string(raw: bytes) -> str:
    import json

    return json.loads(b'"' + raw + b'"')


def _json_object(args: bytes) -> dict:
    import json

    try:
        return json.loads(b"{" + args + b"}")
    except ValueError:
        return {}
