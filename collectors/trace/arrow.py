"""Arrow columns straight from numpy buffers and Python lists, without ``pa.array``.

``pa.array`` imports pandas (~0.3 s) to rule out pandas input and a ``cast`` imports
pyarrow.compute (~0.15 s): a small trace's whole import costs less than that.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _validity(null: np.ndarray | None) -> tuple[Any, int]:
    import pyarrow as pa

    if null is None or not null.any():
        return None, 0
    return pa.py_buffer(np.packbits(~null, bitorder="little")), int(null.sum())


def numbers(values: Any, dtype: type[np.number], null: np.ndarray | None = None):
    """A numeric arrow column of numpy ``dtype`` (int32, int64 or float64) from buffers."""
    import pyarrow as pa

    arr = np.ascontiguousarray(values, dtype=dtype)
    validity, nulls = _validity(null)
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr),
                                 [validity, pa.py_buffer(arr)], null_count=nulls)  # fmt: skip


def bools(values: np.ndarray, null: np.ndarray | None = None):
    """A boolean arrow column from numpy."""
    import pyarrow as pa

    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    validity, nulls = _validity(null)
    return pa.Array.from_buffers(pa.bool_(), len(values), [validity, bits], null_count=nulls)


def strings(values: list[str | None]):
    """A string arrow column from offsets + bytes (a ``cast`` from large_string would import
    pyarrow.compute: ~0.15 s of a small import)."""
    import pyarrow as pa

    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    validity, nulls = _validity(np.array([v is None for v in values], dtype=bool))
    data = pa.py_buffer(b"".join(encoded))
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.string(), len(values),
                                     [validity, pa.py_buffer(offsets.astype(np.int32)), data],
                                     null_count=nulls)  # fmt: skip
    return pa.Array.from_buffers(pa.large_string(), len(values), [validity, pa.py_buffer(offsets),
                                 data], null_count=nulls).cast(pa.string())  # fmt: skip


def dict_array(codes: np.ndarray, values: list[Any]):
    """Dictionary-encoded strings: a 100 M-row kernel table stays compact on disk.

    A None value becomes a null entry (masked index), never a null in the dictionary.
    """
    import pyarrow as pa

    null = np.array([v is None for v in values], dtype=bool)
    mask = null[codes] if null.any() and len(codes) else None
    indices = numbers(codes, np.int32, mask)
    dictionary = strings(["" if v is None else v for v in values])
    return pa.DictionaryArray.from_arrays(indices, dictionary)
