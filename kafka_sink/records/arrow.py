"""Normalising byte columns (pyarrow arrays or Python sequences) for the columnar paths.

Role: one place that turns whatever a caller hands the bulk encoders (Binary, LargeBinary,
String, LargeString, view types, chunked arrays, sliced arrays, or a sequence of bytes | None)
into a single contiguous pyarrow Binary/LargeBinary array plus numpy views of its offsets,
data and per-row lengths.

``int_column`` and ``valid_mask`` read integer and validity data straight from Arrow buffers,
``arrow_ints`` wraps a numpy integer array without a copy and ``binary_scalar`` makes a bytes
scalar: pyarrow's own ``to_numpy``,
``pa.array`` and ``pa.scalar`` import pandas whenever pandas is installed, which costs a process
tens of MiB of resident memory and a second of start-up for nothing the producer uses.

Invariants: ``offsets`` has ``len + 1`` entries and already accounts for the array's slice
offset, so row i's bytes are ``data[offsets[i]:offsets[i + 1]]``; ``lengths[i]`` is -1 for a
null row and the byte length otherwise; strings are taken as their UTF-8 bytes, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = [
    "ByteColumn",
    "arrow_ints",
    "as_byte_column",
    "binary_scalar",
    "int_column",
    "valid_mask",
]

_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class ByteColumn:
    array: Any  # pa.BinaryArray | pa.LargeBinaryArray, a single chunk
    offsets: npt.NDArray[np.int64]
    data: npt.NDArray[np.uint8]
    lengths: npt.NDArray[np.int64]
    null_count: int

    def __len__(self) -> int:
        return len(self.lengths)


def _to_binary_array(values: Any) -> Any:
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            values = values.chunk(0)
        else:
            if values.nbytes > _INT32_MAX and not pa.types.is_large_binary(values.type):
                # 32-bit offsets cannot address the combined data: widen first.
                values = values.cast(pa.large_binary())
            values = values.combine_chunks()
    elif not isinstance(values, pa.Array):
        values = pa.array(_as_list(values), type=pa.binary())
    t = values.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return values
    if pa.types.is_string(t):
        return values.view(pa.binary())
    if pa.types.is_large_string(t):
        return values.view(pa.large_binary())
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t) or pa.types.is_fixed_size_binary(t):
        return values.cast(pa.binary())
    if pa.types.is_null(t):
        return pa.nulls(len(values), type=pa.binary())
    raise TypeError(f"expected a binary or string column, got {t}")


def _as_list(values: Sequence[bytes | None]) -> list[bytes | None]:
    return values if isinstance(values, list) else list(values)


def as_byte_column(values: Any) -> ByteColumn:
    """Normalise ``values`` (see the module docstring) into a ByteColumn."""
    arr = _to_binary_array(values)
    n = len(arr)
    large = pa.types.is_large_binary(arr.type)
    buffers = arr.buffers()
    off_type = np.int64 if large else np.int32
    if n == 0 or buffers[1] is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        raw = np.frombuffer(buffers[1], dtype=off_type, count=arr.offset + n + 1)
        offsets = raw[arr.offset :].astype(np.int64)
    data = (
        np.frombuffer(buffers[2], dtype=np.uint8)
        if buffers[2] is not None
        else np.zeros(0, dtype=np.uint8)
    )
    lengths = np.diff(offsets)
    null_count = arr.null_count
    if null_count:
        lengths = np.where(valid_mask(arr), lengths, -1)
    return ByteColumn(arr, offsets, data, lengths, null_count)


def _single_chunk(array: Any) -> Any:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def valid_mask(array: Any) -> npt.NDArray[np.bool_]:
    """One bool per row of an Arrow array: True where the row is not null."""
    arr = _single_chunk(array)
    n = len(arr)
    if arr.null_count == 0:
        return np.ones(n, dtype=np.bool_)
    if pa.types.is_null(arr.type):
        return np.zeros(n, dtype=np.bool_)
    bitmap = np.frombuffer(arr.buffers()[0], dtype=np.uint8)
    bits = np.unpackbits(bitmap, count=arr.offset + n, bitorder="little")
    return bits[arr.offset :].astype(np.bool_)


def int_column(array: Any, fill: int, dtype: type[np.signedinteger[Any]]) -> npt.NDArray[Any]:
    """An integer Arrow array as a new numpy array of ``dtype``, nulls replaced by ``fill``."""
    arr = _single_chunk(array)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=dtype)
    if pa.types.is_null(arr.type):
        return np.full(n, fill, dtype=dtype)
    if not pa.types.is_integer(arr.type):
        raise TypeError(f"expected an integer column, got {arr.type}")
    sign = "uint" if pa.types.is_unsigned_integer(arr.type) else "int"
    width = np.dtype(f"{sign}{arr.type.bit_width}")
    raw = np.frombuffer(arr.buffers()[1], dtype=width, count=arr.offset + n)[arr.offset :]
    out = raw.astype(dtype)  # always a copy: callers write into it
    if arr.null_count:
        out[~valid_mask(arr)] = fill
    return out


def arrow_ints(values: npt.NDArray[Any]) -> Any:
    """A numpy int32/int64 array as an Arrow array sharing its memory (no nulls)."""
    data = np.ascontiguousarray(values)
    if data.dtype == np.int32:
        arrow_type = pa.int32()
    elif data.dtype == np.int64:
        arrow_type = pa.int64()
    else:
        data = data.astype(np.int64)
        arrow_type = pa.int64()
    return pa.Array.from_buffers(arrow_type, len(data), [None, pa.py_buffer(data)])


def binary_scalar(data: bytes, large: bool) -> Any:
    """``data`` as an Arrow binary (or large binary) scalar."""
    offsets = np.array([0, len(data)], dtype=np.int64 if large else np.int32)
    arrow_type = pa.large_binary() if large else pa.binary()
    one = pa.Array.from_buffers(arrow_type, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return one[0]
