"""The trace_* tables as typed numpy and list columns; Arrow is built only where needed.

A small trace's run is spooled as JSON straight from these columns (store/spool/bundle.py), so its
import never loads pyarrow: 26-30 ms of import, 12 ms more for pyarrow.parquet, and the
Parquet writes, out of a 0.4 s goal (issue 12). Big tables, and anything JSON cannot hold
exactly, go to Parquet through ``to_arrow`` as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Column type -> the SQL type its spooled JSON values are read as (store/commit.py).
SQL_TYPES = {"int32": "INTEGER", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN",
             "string": "VARCHAR"}  # fmt: skip
_NUMPY = {"int32": np.int32, "int64": np.int64, "double": np.float64, "bool": np.bool_}


@dataclass
class Column:
    """One typed column. ``values``: a numpy array (for strings with a ``dictionary``, the
    int codes into it) or a list of str/None; ``null``: True where a number is NULL."""

    type: str  # a key of SQL_TYPES
    values: Any
    null: np.ndarray | None = None
    dictionary: list[str | None] | None = None  # a None entry is NULL

    def python(self) -> list[Any]:
        """The values as Python objects, None for NULL."""
        if self.dictionary is not None:
            return [self.dictionary[int(i)] for i in self.values]
        if self.type == "string":
            return list(self.values)
        out = np.asarray(self.values, dtype=_NUMPY[self.type]).tolist()
        if self.null is not None and self.null.any():
            for i in np.flatnonzero(self.null):
                out[int(i)] = None
        return out

    def json_values(self) -> Any:
        """What orjson writes for this column (numpy where no NULL needs a None)."""
        if self.type == "string" or (self.null is not None and self.null.any()):
            return self.python()
        return np.ascontiguousarray(self.values, dtype=_NUMPY[self.type])

    def finite(self) -> bool:
        """JSON has no NaN or infinity: such a column is spooled as Parquet."""
        if self.type != "double" or not len(self.values):
            return True
        values = np.asarray(self.values, dtype=np.float64)
        keep = values if self.null is None else values[~self.null]
        return bool(np.isfinite(keep).all())

    def arrow(self, rows: slice = slice(None)) -> Any:
        """The column (or its ``rows``) as an Arrow array."""
        from collectors.trace import arrow

        null = None if self.null is None else self.null[rows]
        if self.dictionary is not None:
            return arrow.dict_array(np.asarray(self.values)[rows], self.dictionary)
        if self.type == "string":
            return arrow.strings(self.values[rows])
        if self.type == "bool":
            return arrow.bools(np.asarray(self.values, dtype=bool)[rows], null)
        return arrow.numbers(self.values[rows], _NUMPY[self.type], null)


@dataclass
class Table:
    """A table built in parts (one per rank) that share its column names and types."""

    parts: list[dict[str, Column]] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(next(iter(p.values())).values) for p in self.parts if p)

    @property
    def num_rows(self) -> int:
        return len(self)

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], schema: list[tuple[str, str]]) -> Table:
        """One part from row dicts; ``schema``: (name, type) in column order."""
        part = {}
        for name, typ in schema:
            values = [r[name] for r in rows]
            if typ == "string":
                part[name] = Column(typ, values)
            else:  # NULL is a 0 (False) under the null mask
                null = np.array([v is None for v in values], dtype=bool)
                filled = [0 if v is None else v for v in values]
                part[name] = Column(typ, np.array(filled, dtype=_NUMPY[typ]), null)
        return cls([part])

    def column(self, name: str) -> list[Any]:
        """One column's values across all parts, as Python objects."""
        return [v for p in self.parts for v in p[name].python()]

    def to_arrow(self) -> Any:
        """A pyarrow Table (parts with different dictionaries are unified)."""
        import pyarrow as pa

        if not self.parts:
            return pa.table({})
        tables = [pa.table({n: c.arrow() for n, c in p.items()}) for p in self.parts]
        return pa.concat_tables(tables, promote_options="permissive")

    def arrow_slices(self, rows: int) -> Iterator[Any]:
        """The table as pyarrow Tables of at most ``rows`` rows, in order: written one at a
        time, a 10-million-row table's Arrow copies (int8 codes widened to int32, validity
        bits) never exist whole (docs/benchmarks.md, Import memory)."""
        import pyarrow as pa

        for part in self.parts:
            n = len(next(iter(part.values())).values) if part else 0
            for lo in range(0, n, rows):
                yield pa.table({name: c.arrow(slice(lo, lo + rows)) for name, c in part.items()})

    def spool_columns(self) -> dict[str, tuple[str, Any]] | None:
        """``{name: (SQL type, JSON values)}`` for the JSON spool; None when a value cannot
        be written as JSON exactly (NaN or infinity)."""
        if not self.parts:
            return None
        columns: dict[str, tuple[str, Any]] = {}
        for name, first in self.parts[0].items():
            cols = [p[name] for p in self.parts]
            if not all(c.finite() for c in cols):
                return None
            values = [c.json_values() for c in cols]
            if all(isinstance(v, np.ndarray) for v in values):
                joined: Any = np.concatenate(values)
            else:
                joined = [x for v in values for x in (v.tolist() if isinstance(v, np.ndarray)
                                                      else v)]  # fmt: skip
            columns[name] = (SQL_TYPES[first.type], joined)
        return columns
