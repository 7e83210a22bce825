"""Normalising byte columns (pyarrow arrays or Python sequences) for the columnar paths.

Role: the one place that turns whatever a caller hands a columnar path as keys or values
(Binary, LargeBinary, String, LargeString, view types, fixed-size binary, dictionary-encoded
strings or bytes, a null-typed column, chunked or sliced arrays, or a sequence of
``bytes | bytearray | memoryview | str | None``) into a single-chunk pyarrow Binary/LargeBinary
array (``as_binary_array``), and that reads it as numpy views: ``binary_offsets`` (row i's
bytes start at ``offsets[i]`` and end at ``offsets[i + 1]``, no copy) and ``as_byte_column``
(offsets, data and per-row lengths together). The Spark sink's columns
(``spark.executor.columns``), ``send_columns`` (``producer.bulk``), the batch sealer
(``records.columnar``) and the vectorised key hash (``records.murmur2_columns``) all go through it.

``int_column`` and ``valid_mask`` read integer and validity data straight from Arrow buffers,
``arrow_ints`` wraps a numpy integer array without a copy and ``binary_scalar`` makes a bytes
scalar: pyarrow's own ``to_numpy``,
``pa.array`` and ``pa.scalar`` import pandas whenever pandas is installed, which costs a process
tens of MiB of resident memory and a second of start-up for nothing the producer uses.

``BinaryArray`` is the one column type below the producer's boundary: a single-chunk pyarrow
Binary or LargeBinary array, nulls allowed (a null-typed column becomes binary nulls). The Spark
sink's columns and ``send_columns`` normalise into it once (``binary_column``); the batch sealer,
the key hash and the bulk path below take it as it is (``byte_column`` reads it without
normalising again).

Invariants: strings are taken as their UTF-8 bytes, unchanged, and Binary, LargeBinary, String
and LargeString arrays are never copied (a view of the same buffers); a null-typed column stays
a NullArray in ``as_binary_array`` (nothing is allocated for it) and becomes binary nulls only
in ``as_byte_column``; ``offsets`` already accounts for the array's slice offset;
``lengths[i]`` is -1 for a null row and the byte length otherwise; a column of the wrong type
raises TypeError naming it (``what``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_sink.records.batch import as_bytes

__all__ = [
    "BinaryArray",
    "ByteColumn",
    "arrow_ints",
    "as_binary_array",
    "as_byte_column",
    "binary_column",
    "binary_offsets",
    "binary_scalar",
    "byte_column",
    "int_column",
    "valid_mask",
]

_INT32_MAX = (1 << 31) - 1

#: A single-chunk Binary or LargeBinary array (pyarrow has no type stubs: mypy reads it as Any,
#: so ``binary_column`` is what holds a value to it).
BinaryArray: TypeAlias = "pa.BinaryArray | pa.LargeBinaryArray"


@dataclass(frozen=True, slots=True)
class ByteColumn:
    array: BinaryArray
    offsets: npt.NDArray[np.int64]
    data: npt.NDArray[np.uint8]
    lengths: npt.NDArray[np.int64]
    null_count: int

    def __len__(self) -> int:
        return len(self.lengths)


def binary_column(values: object, what: str = "values") -> BinaryArray:
    """``values`` (see the module docstring) as a :data:`BinaryArray`: ``as_binary_array``, with
    a null-typed column as binary nulls. A BinaryArray is returned as it is."""
    if isinstance(values, pa.BinaryArray | pa.LargeBinaryArray):
        return values
    array = as_binary_array(values, what)
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), type=pa.binary())
    return array


def as_binary_array(values: object, what: str = "values") -> BinaryArray | pa.NullArray:
    """``values`` (see the module docstring) as one Binary or LargeBinary array, or as is when
    null-typed; strings keep their bytes. TypeError, naming ``what``, for anything else."""
    array: pa.Array
    if isinstance(values, pa.ChunkedArray):
        array = _one_chunk(values)
    elif isinstance(values, pa.Array):
        array = values
    else:
        return _sequence_array(values, what)
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_null(t):
        return array
    if pa.types.is_string(t):
        return array.view(pa.binary())
    if pa.types.is_large_string(t):
        return array.view(pa.large_binary())
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t) or pa.types.is_fixed_size_binary(t):
        return array.cast(pa.binary())
    raise TypeError(f"{what} must be a binary or string column, got {t}")


def _one_chunk(values: Any) -> Any:
    if values.num_chunks == 1:
        return values.chunk(0)
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if values.nbytes > _INT32_MAX and not pa.types.is_large_binary(values.type):
        # 32-bit offsets cannot address the combined data: widen first.
        values = values.cast(pa.large_binary())
    return values.combine_chunks()


def _sequence_array(values: Any, what: str) -> Any:
    try:
        array = pa.array(
            [None if item is None else as_bytes(what, item) for item in values], type=pa.binary()
        )
    except TypeError:
        raise
    except Exception as exc:
        raise TypeError(f"{what} must be a sequence of bytes | None: {exc}") from None
    # pa.array splits more than 2 GiB of binary data into chunks.
    return _one_chunk(array) if isinstance(array, pa.ChunkedArray) else array


def binary_offsets(array: BinaryArray) -> npt.NDArray[np.int32] | npt.NDArray[np.int64]:
    """The offsets of a Binary/LargeBinary array, its slice offset applied: a view, no copy.

    Row i's bytes are ``data[offsets[i]:offsets[i + 1]]`` of the array's data buffer (so a
    slice's first offset need not be 0).
    """
    n = len(array)
    buffer = array.buffers()[1]
    if n == 0 or buffer is None:
        return np.zeros(n + 1, dtype=np.int64)
    dtype = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    offsets: npt.NDArray[Any] = np.frombuffer(buffer, dtype=dtype, count=array.offset + n + 1)
    return offsets[array.offset :]


def as_byte_column(values: object) -> ByteColumn:
    """Normalise ``values`` (see the module docstring) into a ByteColumn."""
    return byte_column(binary_column(values))


def byte_column(arr: BinaryArray) -> ByteColumn:
    """The numpy views of an already normalised column (no normalisation, no copy of data)."""
    offsets = binary_offsets(arr).astype(np.int64)
    buffers = arr.buffers()
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
