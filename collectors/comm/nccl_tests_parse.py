"""Parse nccl-tests output: text logs of every era, and the ``-J`` JSON file. Pure Python.

Text rows are split on whitespace (never on columns): ``size count type [redop] [root]``
then an out-of-place and an in-place half of ``time algbw busbw #wrong`` (plus four
per-iteration columns in the newest builds, and a timestamp with ``-R``). Eras differ:
<=2.12 has no ``root`` column and an ``error`` column (a max error, not a count; alltoall
prints an empty redop); 2.13+ ``#wrong``; 2.17.3+ ``# nccl-tests version``/``# Collective
test starting``; 2.18.1+ ``unalign``. The oldest builds print time in ms. Real logs
interleave ``NCCL INFO`` lines, launcher prefixes and ``NCCL version`` lines, include
size-0 rows, and may lack the footer or the preamble.
"""

from __future__ import annotations

import json
import math
import re
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

PROGRAMS = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "alltoall": "all_to_all",
    "reduce_scatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
    "sendrecv": "sendrecv", "gather": "gather", "scatter": "scatter",
    "hypercube": "hypercube", "alltoallv": "all_to_allv",
}  # fmt: skip
DTYPES = {"float": "fp32", "float32": "fp32", "half": "fp16", "float16": "fp16",
          "bfloat16": "bf16", "double": "fp64", "float64": "fp64"}  # fmt: skip
_PREFIX = re.compile(
    r"^(?:\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?\s*|\d+:\s+|[A-Za-z][\w.-]*:\s+)+"
)  # mpirun [1,0]<stdout>:, [0], srun -l "0: ", pdsh "node1: "
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_RANK = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+"
                   r"\s+\[[^\]]*\]\s*(.*)$")  # fmt: skip
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d{2}:\d{2}:\d{2}$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# The era when the log says none: the table header has a root column since 2.13.
_ERAS = {False: "<=2.12 (inferred)", True: "2.13-2.17.2 (inferred)"}


class NotNcclTests(ValueError):
    """The file holds no nccl-tests table (message says what was found instead)."""


@dataclass
class Half:
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None


@dataclass
class Row:
    op: str | None
    size: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Half | None
    in_place: Half | None


@dataclass
class Parsed:
    format: str  # text | json
    rows: list[Row] = field(default_factory=list)
    world_size: int | None = None
    gpu_names: list[str] = field(default_factory=list)
    hostname: str | None = None
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    footers: list[float] = field(default_factory=list)
    iters: int | None = None
    graph: bool | None = None
    nccl_env: dict[str, str] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    noise_rows: int = 0  # lines shaped like rows that did not parse (e.g. interleaved output)

    @property
    def ops(self) -> list[str]:
        return list(dict.fromkeys(r.op for r in self.rows if r.op))

    @property
    def dtypes(self) -> list[str]:
        return list(dict.fromkeys(r.dtype for r in self.rows))

    def halves(self) -> list[tuple[Row, bool, Half]]:
        """(row, in place?, half) of every measured half, out-of-place first."""
        return [(row, in_place, half) for row in self.rows
                for in_place, half in ((False, row.out_of_place), (True, row.in_place))
                if half is not None]  # fmt: skip

    @property
    def avg_busbw_gbps(self) -> float | None:
        """Mean busbw over both halves of every row, as nccl-tests' footer defines it."""
        values = [h.busbw_gbps for _, _, h in self.halves() if h.busbw_gbps is not None]
        return sum(values) / len(values) if values else None


def op_from_program(text: str | None) -> str | None:
    """``./build/all_reduce_perf_mpi`` -> ``all_reduce``."""
    if not text:
        return None
    m = re.search(r"([a-z_]+?)_perf", PurePath(text.strip()).name)
    return PROGRAMS.get(m[1]) if m else None


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE: 22703 -> 2.27.3 (>= 2.9), 2708 -> 2.7.8 (older)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def parse(text: str, name: str = "") -> Parsed:
    """Parse one file's content; NotNcclTests when it has no nccl-tests table."""
    if text.lstrip().startswith("{"):
        return _parse_json(text, name)
    return _parse_text(text, name)


def _num(token: str) -> float | None:
    if token.upper() in ("N/A", "NAN", "-NAN"):
        return None
    return float(token.rstrip("*"))  # old builds star an out-of-tolerance error


def _count(value: float | None) -> int | None:
    """A ``#wrong`` count; None when unchecked or not a number (a crashed check's nan/inf)."""
    return int(value) if value is not None and math.isfinite(value) else None


def _is_value(token: str) -> bool:
    try:
        _num(token)
        return True
    except ValueError:
        return False


@dataclass
class _Header:
    root: bool | None = None  # None: no header seen, decide per row
    wrong_is_count: bool | None = None
    per_iter: bool = False
    time_scale: float = 1.0  # 1000 when the oldest builds print ms


def _half(tokens: list[str], hdr: _Header) -> Half:
    time_v, alg, bus = (_num(t) for t in tokens[:3])
    raw = tokens[3]
    is_count = hdr.wrong_is_count
    if is_count is None:  # no header seen: a whole number is a count, not a max error
        is_count = re.fullmatch(r"\d+", raw) is not None
    wrong = _count(_num(raw)) if is_count else None
    return Half(None if time_v is None else time_v * hdr.time_scale, alg, bus, wrong)


def parse_row(tokens: list[str], hdr: _Header) -> Row | None:
    """One data row, or None when the tokens are not one."""
    if len(tokens) < 7 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    if not _WORD.match(tokens[2]):
        return None
    rest = [t for t in tokens[3:] if not _TIMESTAMP.match(t)]
    redop = rest.pop(0) if rest and not _is_value(rest[0]) else None
    if not rest or not all(_is_value(t) for t in rest):
        return None
    has_root = hdr.root if hdr.root is not None else len(rest) % 2 == 1
    root = None
    if has_root:
        try:
            root = int(rest.pop(0))
        except ValueError:
            return None
    width = 8 if hdr.per_iter else 4
    if len(rest) not in (width, 2 * width):
        return None
    halves = [_half(rest[i : i + width], hdr) for i in range(0, len(rest), width)]
    out_of_place, in_place = (None, halves[0]) if len(halves) == 1 else halves
    dtype = DTYPES.get(tokens[2], tokens[2])
    return Row(None, int(tokens[0]), int(tokens[1]), dtype, redop, root, out_of_place, in_place)


def _parse_text(text: str, name: str) -> Parsed:
    out = Parsed("text")
    hdr = _Header()
    op = None
    ranks: dict[int, tuple[str, str]] = {}
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw.strip()).strip()
        if not line:
            continue
        if (m := _NCCL_VERSION.search(line)) and not out.nccl_version:
            out.nccl_version = m[1]
        if line.startswith("#"):
            op = _comment(line.lstrip("#").strip(), out, hdr, ranks) or op
            continue
        tokens = line.split()
        row = parse_row(tokens, hdr)
        if row is None:
            out.noise_rows += tokens[0].isdigit() and len(tokens) >= 7
            continue
        row.op = op
        out.rows.append(row)
    if not out.rows:
        raise NotNcclTests("no nccl-tests result table found")
    if ranks:
        out.world_size = max(ranks) + 1
        out.hostname = ranks[min(ranks)][0]
        out.gpu_names = sorted({n for _, n in ranks.values() if n})
    # No "# Collective test starting" line (older eras): the command echoed in the log
    # (e.g. "./build/all_reduce_perf -b 8 ..."), else the file name.
    program = re.search(r"\S*_perf\S*", text)
    fallback = op_from_program(program[0] if program else None) or _op_from_filename(name)
    for row in out.rows:
        row.op = row.op or fallback
    if out.nccl_tests_version is None:
        out.nccl_tests_version = _ERAS.get(hdr.root)
    return out


def _op_from_filename(name: str) -> str | None:
    stem = PurePath(name).name.lower().replace("-", "_")
    # the longest name first: "alltoallv" before "alltoall", "all_reduce" before "reduce"
    return next((PROGRAMS[k] for k in sorted(PROGRAMS, key=len, reverse=True) if k in stem), None)


def _comment(body: str, out: Parsed, hdr: _Header, ranks: dict[int, tuple[str, str]]) -> str | None:
    """Read one ``#`` line into ``out``/``hdr``; return the op when a new test starts."""
    if m := re.match(r"nccl-tests version (\S+)(?:.*nccl-library=(\d+))?", body):
        out.nccl_tests_version = m[1]
        if m[2] and not out.nccl_version:
            out.nccl_version = nccl_version_from_code(int(m[2]))
    elif m := re.match(r"Collective test starting:\s*(\S+)", body):
        return op_from_program(m[1])
    elif body.startswith("nThread"):
        if m := re.search(r"(?<!warmup )(?<!agg )\biters:\s*(\d+)", body):
            out.iters = int(m[1])
        if m := re.search(r"\bgraph:\s*(\d+)", body):
            out.graph = int(m[1]) > 0
    elif m := _RANK.search(body):
        ranks[int(m[1])] = (m[2], m[3].strip())
    elif m := re.match(r"Avg bus bandwidth\s*:\s*(\S+)", body):
        with suppress(ValueError):
            value = float(m[1])
            if not math.isnan(value):
                out.footers.append(value)
    else:
        words = body.split()
        if "size" in words and "count" in words and "type" in words:
            hdr.root = "root" in words
            hdr.wrong_is_count = "#wrong" in words or "wrong" in words
            hdr.per_iter = "i_min" in words
        elif "(B)" in words:
            hdr.time_scale = 1000.0 if "(ms)" in words else 1.0
    return None


def _parse_json(text: str, name: str) -> Parsed:
    try:
        doc = json.loads(text)
    except RecursionError:
        raise NotNcclTests(f"JSON nested deeper than the parser's limit (about "
                           f"{sys.getrecursionlimit()} levels)") from None  # fmt: skip
    except ValueError as exc:
        raise NotNcclTests(f"not valid JSON ({exc}); a crashed run may have truncated it") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise NotNcclTests("JSON without a nccl-tests 'results' list")
    try:
        return _json_doc(doc, name)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        # a value of the wrong kind where -J writes a number, an object or a list
        why = f"{type(exc).__name__}: {str(exc)[:80]}"
        raise NotNcclTests(f"nccl-tests JSON with a malformed entry ({why})") from None


def _json_doc(doc: dict[str, Any], name: str) -> Parsed:
    out = Parsed("json")
    args = doc.get("args") or []
    op = op_from_program(args[0] if args else None) or _op_from_filename(name)
    config = doc.get("config") or {}
    devices = config.get("devices") or []
    per_proc = int(config.get("nthreads") or 1) * int(config.get("ngpus") or 1)
    out.world_size = len(devices) * per_proc if devices else None
    out.gpu_names = sorted({str(d.get("device_info", "")).strip() for d in devices} - {""})
    out.hostname = devices[0].get("hostname") if devices else None
    if isinstance(doc.get("nccl_version"), int):
        out.nccl_version = nccl_version_from_code(doc["nccl_version"])
    out.iters = config.get("iterations")
    out.graph = bool(config["graph"]) if "graph" in config else None
    out.started_at, out.finished_at = doc.get("start_time"), doc.get("end_time")
    for item in doc.get("env") or []:
        key, _, value = str(item).partition("=")
        if key.startswith("NCCL_"):
            out.nccl_env[key] = value
    out.rows = [_json_row(r, op) for r in doc["results"]]
    footer = (doc.get("average_bus_bandwidth") or {}).get("bandwidth")
    if isinstance(footer, (int, float)):
        out.footers.append(float(footer))
    if not out.rows:
        raise NotNcclTests("nccl-tests JSON with an empty results list")
    return out


def _json_half(obj: Any) -> Half | None:
    if not isinstance(obj, dict):
        return None

    def val(key: str) -> float | None:
        v = obj.get(key)
        return float(v) if isinstance(v, (int, float)) else None

    time_v = val("time") if "time" in obj else val("cpu_time")
    return Half(time_v, val("alg_bw"), val("bus_bw"), _count(val("nwrong")))


def _json_row(r: dict[str, Any], op: str | None) -> Row:
    try:
        root = int(str(r.get("root", "")).strip())
    except ValueError:
        root = None
    dtype = str(r.get("type", ""))
    return Row(op, int(r["size"]), int(r["count"]), DTYPES.get(dtype, dtype),
               r.get("redop") or None, root, _json_half(r.get("out_of_place")),
               _json_half(r.get("in_place")))  # fmt: skip


def infer_world_size(parsed: Parsed) -> int | None:
    """Ranks from busbw/algbw (2(n-1)/n or (n-1)/n) when the log lost its preamble."""
    best: tuple[float, float, str] | None = None
    for row, _, half in parsed.halves():
        if (
            row.op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
            and (half.algbw_gbps and half.busbw_gbps is not None)
            and (best is None or half.algbw_gbps > best[0])
        ):
            best = (half.algbw_gbps, half.busbw_gbps, row.op)
    if best is None or best[0] < 1.0:  # two printed decimals: too coarse below 1 GB/s
        return None
    alg, bus, op = best
    ratio = bus / alg / (2.0 if op == "all_reduce" else 1.0)  # (n-1)/n
    if ratio <= 0 or ratio >= 1:
        return None
    n = 1.0 / (1.0 - ratio)
    return round(n) if abs(n - round(n)) < 0.15 and round(n) >= 2 else None
