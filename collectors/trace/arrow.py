"""Arrow columns straight from numpy buffers and Python lists, without ``pa.array``.

``pa.array`` imports pandas (~0.3 s) to rule out pandas input and a ``cast`` imports
pyarrow.compute (~0.15 s): a small trace's whole import costs less than that.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_NP = {"int32": np.int32, "int64": np.int64, "double": np.float64}


def _col(values: Any, typ: Any, null: np.ndarray | None = None):
    """A numeric arrow column straight from numpy buffers (zero copy where possible).

    ``pa.array(ndarray)`` would import pandas (~0.3 s) just to rule out pandas input.
    """
    import pyarrow as pa

    arr = np.ascontiguousarray(values, dtype=_NP[str(typ)])
    validity, nulls = None, 0
    if null is not None and null.any():
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
        nulls = int(null.sum())
    return pa.Array.from_buffers(typ, len(arr), [validity, pa.py_buffer(arr)], null_count=nulls)


def _from_rows(rows: list[dict[str, Any]], schema: Any):
    """A small table from row dicts, built column by column without ``pa.array``."""
    import pyarrow as pa

    cols = []
    for f in schema:
        values = [r[f.name] for r in rows]
        null = np.array([v is None for v in values], dtype=bool)
        if f.type == pa.string():
            cols.append(_strings(values))
        elif f.type == pa.bool_():
            bits = pa.py_buffer(np.packbits(np.array([bool(v) for v in values]), bitorder="little"))
            validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null.any() else None
            cols.append(pa.Array.from_buffers(pa.bool_(), len(values), [validity, bits],
                                              null_count=int(null.sum())))  # fmt: skip
        else:
            cols.append(_col([0 if v is None else v for v in values], f.type, null))
    return pa.Table.from_arrays(cols, schema=schema)


def _bools(values: np.ndarray):
    """A boolean arrow column from numpy (``pa.array`` would import pandas)."""
    import pyarrow as pa

    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, bits])


def _strings(values: list[str | None]):
    """A string arrow column from offsets + bytes (``pa.array`` would import pandas, and
    a ``cast`` from large_string pyarrow.compute: ~0.15 s of a small import)."""
    import pyarrow as pa

    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    null = np.array([v is None for v in values], dtype=bool)
    validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null.any() else None
    data = pa.py_buffer(b"".join(encoded))
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.string(), len(values),
                                     [validity, pa.py_buffer(offsets.astype(np.int32)), data],
                                     null_count=int(null.sum()))  # fmt: skip
    return pa.Array.from_buffers(pa.large_string(), len(values), [validity, pa.py_buffer(offsets),
                                 data], null_count=int(null.sum())).cast(pa.string())  # fmt: skip


def _dict_array(codes: np.ndarray, values: list[Any]):
    """Dictionary-encoded strings: a 100 M-row kernel table stays compact on disk.

    A None value becomes a null entry (masked index), never a null in the dictionary.
    """
    import pyarrow as pa

    null = np.array([v is None for v in values], dtype=bool)
    mask = null[codes] if null.any() and len(codes) else None
    indices = _col(codes, pa.int32(), mask)
    dictionary = _strings(["" if v is None else v for v in values])
    return pa.DictionaryArray.from_arrays(indices, dictionary)
