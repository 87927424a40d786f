"""Benchmark result files of any engine, read one result at a time: JSON, JSONL, logs.

A file whose first line is a whole JSON object is JSON lines (one line: a JSON file, as
``--save-result`` writes it); one whose first line is not is a (pretty-printed) JSON file up
to ``MAX_JSON_BYTES``, else a text log holding printed ``Serving Benchmark Result`` blocks
(collectors/serving/printed.py). JSON lines and logs are read line by line, so a file of any
length is read in bounded memory; each engine maps its own keys of every era onto vLLM's
(its adapter's ``normalize``, e.g. collectors/serving/sglang/result_keys.py). Bare
``Infinity`` and ``NaN`` (what Python's ``json.dumps`` writes) are read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from collectors.core import inputs
from collectors.core.errors import InputError
from collectors.serving import printed
from collectors.serving.results import is_result

# One JSON result: vLLM's --save-detailed per-request lists make a large sweep's file tens of
# MB; parsed, such a file takes about three times its size.
MAX_JSON_BYTES = 128 * inputs.MiB
MAX_LINE_BYTES = MAX_JSON_BYTES  # one JSONL result line, or one log line
# Folder expansion: saved results and the usual names of captured logs.
FOLDER_GLOBS = ("*.json", "*.jsonl", "*.log", "*.out", "*.txt")
WHAT = "a benchmark result or log"


@dataclass
class Result:
    """One benchmark result read from a file: the object, how it was stored, its place."""

    obj: dict[str, Any]
    fmt: str  # json | jsonl | printed
    part: int | None = None  # index in a file holding several results
    where: str = ""  # the file and the result's place in it, for messages


def result_files(paths: list[Path]) -> list[Path]:
    """Expand folders to their results and logs, skipping the ``*.pytorch.json`` twins and
    text files in a folder that hold no printed block (other logs lying beside them); a
    file named twice (or under two names) once."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = {q for g in FOLDER_GLOBS for q in p.glob(g) if q.is_file()}
            out.extend(sorted(q for q in found if not q.name.endswith(".pytorch.json")
                              and (q.suffix in (".json", ".jsonl") or _has_block(q))))  # fmt: skip
        else:
            inputs.check_file(p, WHAT, folders_ok=True)
            out.append(p)
    if not out:
        raise InputError(f"{', '.join(map(str, paths))}: no benchmark result (*.json, *.jsonl) "
                         "or log with a printed result block (*.log, *.out, *.txt) found")  # fmt: skip
    return inputs.unique(out)


def _has_block(path: Path) -> bool:
    try:
        with inputs.open_input(path, what=WHAT) as fh:
            return any(printed.HEADER_TEXT in line for _, line in
                       inputs.lines(fh, path, MAX_LINE_BYTES))  # fmt: skip
    except InputError:
        return True  # let the import say what is wrong with it


def digest(path: Path) -> bytes:
    """sha256 of the file's bytes, read in blocks."""
    with inputs.open_input(path, what=WHAT) as fh:
        return hashlib.file_digest(fh, "sha256").digest()


def load_results(path: Path, normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None
                 ) -> Iterator[Result]:  # fmt: skip
    """Every result in a file, one at a time: JSON lines, one JSON object, or printed blocks
    in a log; ``normalize`` (the engine's) renames a JSON result's keys to vLLM's first."""
    with inputs.open_input(path, what=WHAT) as fh:
        first = _first_line(fh, path)
        if first is None:
            raise InputError(f"{path}: the file is empty")
        number, line = first
        try:
            head = inputs.parse_json(line, path)
        except inputs.TooDeep:
            raise
        except InputError:
            head = None  # a pretty-printed JSON file, or a log
        found = _json_lines(fh, path, number, head) if isinstance(head, dict) else \
            _whole_or_printed(fh, path)
        held: Result | None = None  # one result held back: a file of one has no part index
        count = 0
        for r in found:
            _check(r, normalize)
            if held is not None:
                yield held
            held, r.part, count = r, count, count + 1
        if held is not None:
            if count == 1:
                held.part = None
                if held.fmt == "jsonl":  # one line: a JSON file as --save-result writes it
                    held.fmt, held.where = "json", str(path)
            yield held


def _first_line(fh: IO[bytes], path: Path) -> tuple[int, bytes] | None:
    for number, line in inputs.lines(fh, path, MAX_LINE_BYTES):
        if line.strip():
            return number, line
    return None


def _json_lines(fh: IO[bytes], path: Path, number: int, head: dict) -> Iterator[Result]:
    yield Result(head, "jsonl", where=f"{path} line {number}")
    for n, line in inputs.lines(fh, path, MAX_LINE_BYTES):
        if line.strip():
            obj = inputs.parse_json(line, path, f" line {n}")
            if not isinstance(obj, dict):
                raise InputError(f"{path} line {n}: a JSON {type(obj).__name__}, not a result "
                                 "object")  # fmt: skip
            yield Result(obj, "jsonl", where=f"{path} line {n}")


def _whole_or_printed(fh: IO[bytes], path: Path) -> Iterator[Result]:
    """One (pretty-printed) JSON object, else the printed blocks of a log."""
    fh.seek(0)
    size = os.fstat(fh.fileno()).st_size
    why = None
    if size <= MAX_JSON_BYTES:
        text = fh.read(MAX_JSON_BYTES + 1)
        try:
            obj = inputs.parse_json(text, path)
        except inputs.TooDeep:
            raise
        except InputError as exc:
            why = str(exc).removeprefix(f"{path}: ")
        else:
            del text
            if not isinstance(obj, dict):
                raise InputError(f"{path}: not a serving benchmark result (a JSON "
                                 f"{type(obj).__name__}, not an object)")  # fmt: skip
            yield Result(obj, "json", where=str(path))
            return
        del text
        fh.seek(0)
    else:
        why = f"over the {inputs.size_text(MAX_JSON_BYTES)} limit for one JSON result"
    text_lines = (line.decode("utf-8", errors="replace")
                  for _, line in inputs.lines(fh, path, MAX_LINE_BYTES))  # fmt: skip
    blocks = printed.parse(text_lines)
    if not blocks:
        raise InputError(f"{path}: {why} and no printed 'Serving Benchmark Result' block in it "
                         "(a results file or a log of the benchmark's output is needed)")  # fmt: skip
    for b in blocks:
        yield Result(printed.to_result(b), "printed", where=f"{path} block at line {b.line}")


def _check(r: Result, normalize: Callable[[dict], dict] | None) -> None:
    if normalize is not None:
        r.obj = normalize(r.obj)
    if not is_result(r.obj):
        raise InputError(
            f"{r.where}: not a serving benchmark result (no throughput or latency statistic "
            "such as output_throughput or median_ttft_ms, as `vllm bench serve "
            "--save-result` or sglang.bench_serving --output-file write)"
        )
