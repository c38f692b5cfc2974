"""Arrow arrays to numpy and back through their buffers, and the few Arrow kernels the breakdown calls.

pyarrow's own conversions (``Array.to_numpy``, ``pa.array``) import pandas
when it is installed, a third of a second of start-up that the breakdown
never needs; reading the buffers directly is zero-copy and imports nothing.
The kernels are called through ``pyarrow._compute.call_function``, the engine
under ``pyarrow.compute``, whose import generates a wrapper for each of its
hundreds of functions (and which ``Array.take`` and ``Array.cast`` import).
Every array here is free of nulls (the readers make every value non-NULL).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyarrow import _compute

_NUMPY = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
          pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
          pa.float64(): np.float64}


def _no_nulls(arr: pa.Array) -> None:
    if arr.null_count:
        raise ValueError(f"{arr.null_count} null value(s) in a column read as non-null")


def to_ints(arr: pa.Array | pa.ChunkedArray, null: int | None = None) -> np.ndarray:
    """An integer array as int64 numpy (zero-copy for int64); nulls become ``null`` (None: refused)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if null is not None and arr.null_count:
        values = to_ints(_values_only(arr))
        return np.where(_validity(arr), values, null)
    _no_nulls(arr)
    dtype = _NUMPY.get(arr.type)
    if dtype is None:
        raise TypeError(f"expected an integer column, got {arr.type}")
    values = np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)
    return values if dtype is np.int64 else values.astype(np.int64)


def _values_only(arr: pa.Array) -> pa.Array:
    """The same values without the validity bitmap (what lies under a null is left as it is)."""
    return pa.Array.from_buffers(arr.type, len(arr), [None, *arr.buffers()[1:]], offset=arr.offset)


def _validity(arr: pa.Array) -> np.ndarray:
    bits = np.frombuffer(arr.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little", count=arr.offset + len(arr))[arr.offset:].view(bool)


def to_bools(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy bools (Arrow packs them into bits)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _no_nulls(arr)
    if len(arr) == 0:
        return np.zeros(0, bool)
    bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little", count=arr.offset + len(arr))[arr.offset:].view(bool)


def first_bytes(arr: pa.Array) -> np.ndarray:
    """The first byte of each string (0 for an empty one), read from the array's offsets and data."""
    return _edge_bytes(arr, last=False)


def last_bytes(arr: pa.Array) -> np.ndarray:
    """The last byte of each string (0 for an empty one), read from the array's offsets and data."""
    return _edge_bytes(arr, last=True)


def _edge_bytes(arr: pa.Array, last: bool) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.uint8)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = arr.buffers()[2]
    if data is None or len(data) == 0:
        return np.zeros(n, np.uint8)
    data = np.frombuffer(data, dtype=np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    out = data[np.clip(ends - 1 if last else starts, 0, len(data) - 1)]
    out[ends == starts] = 0
    return out


def has_prefix(arr: pa.Array, rows: np.ndarray, prefix: bytes) -> np.ndarray:
    """Whether each of the strings ``rows`` starts with ``prefix`` (UTF-8 bytes, as Arrow's
    ``starts_with`` compares them), read in the array's buffers: the strings are not copied."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(rows) == 0:
        return np.zeros(0, bool)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    start = offsets[rows].astype(np.int64)
    hit = offsets[rows + 1] - start >= len(prefix)
    data = arr.buffers()[2]
    if not prefix or not hit.any():
        return hit
    data = np.frombuffer(data, dtype=np.uint8)
    for j, byte in enumerate(prefix):
        hit &= data[np.minimum(start + j, len(data) - 1)] == byte
    return hit


def int_array(values: np.ndarray) -> pa.Array:
    """A numpy integer array as an Arrow int64 array (indices for ``take``)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def bool_array(values: np.ndarray) -> pa.Array:
    """A numpy bool array as an Arrow boolean array."""
    bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def string_array(texts: list[str]) -> pa.Array:
    """Python strings as an Arrow string array."""
    data = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """The rows ``idx`` of ``arr``."""
    return _compute.call_function("take", [arr, int_array(idx)])


def starts_with(arr: pa.Array, prefix: str) -> np.ndarray:
    return to_bools(_compute.call_function("starts_with", [arr], _compute.MatchSubstringOptions(prefix)))


def matches(arr: pa.Array, pattern: str) -> np.ndarray:
    """Rows that match the regular expression (RE2) ``pattern``."""
    return to_bools(_compute.call_function("match_substring_regex", [arr], _compute.MatchSubstringOptions(pattern)))


def index_in(arr: pa.Array, values: pa.Array) -> np.ndarray:
    """Each row's index among ``values``, -1 where it is none of them."""
    return to_ints(_compute.call_function("index_in", [arr], _compute.SetLookupOptions(values)), null=-1)


def dictionary_encode(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Each row's index into the distinct values (in order of first appearance), and those values."""
    encoded = _compute.call_function("dictionary_encode", [arr])
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return to_ints(encoded.indices), encoded.dictionary


def cast(arr: pa.Array, to: pa.DataType) -> pa.Array:
    return _compute.call_function("cast", [arr], _compute.CastOptions.safe(to))


def ints_after(arr: pa.Array, skip: int) -> np.ndarray:
    """The integers the strings spell after their first ``skip`` characters."""
    tail = _compute.call_function("utf8_slice_codeunits", [arr], _compute.SliceOptions(skip))
    return to_ints(cast(tail, pa.int64()))
