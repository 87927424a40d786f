"""Property-based fuzzing of the importers (issue 60): real inputs, mutated; one contract.

Each importer's fuzz test (tests/*/test_fuzz_*.py) feeds its verb files made from a real
input by one mutation - truncation, byte flips, a slice repeated, a number made extreme or
not finite, a string made hostile, a value nested deep - and asserts the verb either
commits a whole run (exit 0, the run and its rows in the store) or refuses in one line
naming the file (exit 1), leaving the store as it was. The verb runs in this process
(tests/helpers.run_in_process), as ``python -m collectors`` runs it.

The suite runs a few examples per importer with a fixed seed (``derandomize``); a long run,
random and as many examples as wanted (trace processors of note fuzz their parsers all the
time):

    STEPSCOPE_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest tests -k fuzz -p no:cacheprovider
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.helpers import CliResult, query, run_in_process

LONG_RUN = "STEPSCOPE_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("STEPSCOPE_FUZZ_EXAMPLES", "8"))

NUMBER = re.compile(rb"(?<=[:\[, ])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?=[,\]} \n])")
STRING = re.compile(rb'"[^"\\\n]{1,80}"')
EXTREME = (b"NaN", b"Infinity", b"-Infinity", b"1e308", b"-1", b"0", b"-0.0", b"1e30",
           b"1e-300", b"123456789012345678901234567890", b'"fast"', b"null", b"true")  # fmt: skip
HOSTILE = (b'"\\u001b[2J\\nline two **bold** $x$ :red[red]"', b'"' + b"A" * 100_000 + b'"',
           b'"\\u0000"', b'"../../../../etc/passwd"', b'"%s%n%x"', b'"\\ud800"',
           b'"\'; DROP TABLE runs; --"', b'""')  # fmt: skip


def fuzz_settings(examples: int | None = None) -> settings:
    """A few examples, always the same ones, in the suite; random and many in a long run."""
    return settings(max_examples=examples or EXAMPLES, derandomize=not LONG_RUN, deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with one mutation (JSON-aware ones where its tokens allow)."""
    kind = draw(st.sampled_from(("truncate", "flip", "repeat", "number", "string", "nest")))
    if kind == "truncate":
        return data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    if kind == "flip":
        out = bytearray(data)
        for at in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=8)):
            out[at] ^= draw(st.integers(1, 255))
        return bytes(out)
    if kind == "repeat":
        a = draw(st.integers(0, len(data)))
        b = draw(st.integers(a, min(len(data), a + 4096)))
        return data[:b] + data[a:b] * draw(st.integers(1, 3)) + data[b:]
    tokens = [m.span() for m in (STRING if kind == "string" else NUMBER).finditer(data)]
    if not tokens:
        return data[: len(data) // 2]
    a, b = tokens[draw(st.integers(0, len(tokens) - 1))]
    if kind == "number":
        new = draw(st.sampled_from(EXTREME))
    elif kind == "string":
        new = draw(st.sampled_from(HOSTILE))
    else:
        depth = draw(st.sampled_from((2, 64, 5000, 100_000)))
        new = b"[" * depth + data[a:b] + b"]" * depth
    return data[:a] + new + data[b:]


def table_counts(store: Path) -> dict[str, int]:
    """Rows per base table (``{}`` before the store exists)."""
    if not store.exists():
        return {}
    names = [r[0] for r in query(store, "SELECT table_name FROM information_schema.tables "
                                        "WHERE table_type = 'BASE TABLE'")]  # fmt: skip
    sql = " UNION ALL ".join(f"SELECT '{n}', count(*) FROM \"{n}\"" for n in names)
    return dict(query(store, sql)) if names else {}


class FuzzStore:
    """The store a fuzz test imports into, and its row counts (read again only after a
    commit: a refused input must leave them as they were)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._counts: dict[str, int] | None = None

    def counts(self) -> dict[str, int]:
        if self._counts is None:
            self._counts = table_counts(self.path)
        return self._counts

    def check(self, path: Path, res: CliResult, table: str) -> None:
        """Exit 0 with the run whole in the store, or exit 1: one line naming the file,
        the store as it was (``counts()`` must have been read before the run)."""
        before = self.counts()
        self._counts = None
        check_contract(self.path, path, res, before, table)
        if res.code != 0:
            self._counts = before


def check_contract(store: Path, path: Path, res: CliResult, before: dict[str, int],
                   table: str) -> None:  # fmt: skip
    """Exit 0 with the run whole in the store, or exit 1: one line naming the file, the
    store as it was."""
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    if res.code == 0:
        run_id = res.json["run_id"]
        assert query(store, "SELECT count(*) FROM runs WHERE run_id = ?", [run_id]) == [(1,)]
        rows = query(store, f'SELECT count(*) FROM "{table}" WHERE run_id = ?', [run_id])
        assert rows[0][0] > 0, f"run {run_id} committed without its {table} rows"
        return
    assert res.code == 1, f"exit {res.code}: {res.stderr[-2000:]}"
    assert len(lines) == 1, f"{len(lines)} lines: {res.stderr[-2000:]}"
    assert path.name in lines[0], lines[0][:500]
    assert "internal error" not in lines[0] and "Traceback" not in res.stderr, lines[0][:500]
    assert table_counts(store) == before, "a refused input changed the store"


_files = itertools.count()


def warm_store(where: Path, name: str, data: bytes, *verb: str) -> FuzzStore:
    """The fuzz test's store, made by importing ``data`` unmutated (it must commit: the
    input is valid); ``verb``: the command line, ``{file}`` where the file goes."""
    fs = FuzzStore(where / "stepscope.duckdb")
    path = where / name
    path.write_bytes(data)
    warm = run_in_process(fs.path, *(str(path) if a == "{file}" else a for a in verb))
    assert warm.code == 0, warm.stderr
    return fs


def import_mutated(store: FuzzStore, name: str, content: bytes, table: str, *verb: str) -> None:
    """Import ``content`` as a file called ``name`` and hold the verb to the contract."""
    path = store.path.parent / f"{next(_files)}-{name}"
    path.write_bytes(content)
    store.counts()
    res = run_in_process(store.path, *(str(path) if a == "{file}" else a for a in verb), "--json")
    store.check(path, res, table)
