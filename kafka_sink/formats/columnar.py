"""Numpy primitives of the columnar encoders: per-row byte pieces built and joined in bulk.

Role: the building blocks that the Avro encoder (``avro_columnar``) and the Protobuf encoder
share. A *piece column* is an Arrow ``large_binary`` array holding, for each row, the bytes one
field contributes to that row's payload; an encoder builds one piece column per field and joins
them row by row. Nothing here loops over rows in Python:

- ``zigzag_varints``: an int64 column -> each value's zigzag varint (Avro's ``int``/``long``,
  Protobuf's ``sint32``/``sint64``); ``varints`` without the zigzag step (Protobuf's unsigned
  varints, lengths).
- ``fixed_width_pieces``: a numpy (n x width) byte matrix, or a raw buffer of n equal-width
  values, as a piece column without copying the buffer.
- ``as_pieces``: a binary or string column as a piece column (the same bytes).
- ``boolean_bytes``, ``little_endian_floats``: booleans as one byte 0/1, floats and doubles as
  their little-endian IEEE bytes (Avro's and Protobuf's encodings alike).
- ``join_pieces``: several piece columns (or constant byte strings) concatenated per row.
- ``only_rows``: a piece column with the rows outside a mask made null (nothing when joined).
- ``encode_rows``: a format's parts of every row joined into one payload per row, null rows
  left null (the top of the Avro and Protobuf encoders).
- ``group_pieces``: the pieces of a child column concatenated per parent row, by list offsets;
  zero-copy, since the children of consecutive parents are consecutive.
- ``length_prefixed``: each row's bytes preceded by a varint of their length.
- ``plain_layout``, ``list_offsets``, ``micros``: reading Arrow inputs (the plain layouts the
  encoders handle, a list column's offsets, timestamps and durations as microseconds).

Invariants: a piece column's null row contributes nothing when joined (``join_pieces`` skips
nulls), so encoders mark the rows they do not write as null rather than emptying them; every
output offsets buffer is int64 (``large_binary``), so no join overflows 2 GiB; inputs may be
sliced arrays (their slice offsets are applied).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.records.arrow import binary_offsets, binary_scalar, int_column, valid_mask

__all__ = [
    "NULL_PIECE",
    "PIECES",
    "as_pieces",
    "boolean_bytes",
    "constant_pieces",
    "encode_rows",
    "fixed_width_pieces",
    "group_pieces",
    "join_pieces",
    "length_prefixed",
    "list_offsets",
    "little_endian_floats",
    "micros",
    "only_rows",
    "pieces_from_buffers",
    "plain_layout",
    "varints",
    "zigzag",
    "zigzag_varints",
]

#: The Arrow type of every piece column.
PIECES = pa.large_binary()

_I64 = npt.NDArray[np.int64]
_U64 = npt.NDArray[np.uint64]
_EMPTY = binary_scalar(b"", large=True)
# Arrow timestamp units -> (multiplier, divisor) to microseconds.
_TO_MICROS = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}
#: A null piece, for the rows an encoder does not write.
NULL_PIECE = pa.nulls(1, PIECES)[0]


def zigzag(values: _I64) -> _U64:
    """ZigZag-map signed 64-bit values to unsigned ones (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def pieces_from_buffers(offsets: _I64, data: npt.NDArray[np.uint8] | Any) -> Any:
    """A piece column over an int64 offsets array (n + 1 entries) and a byte buffer."""
    n = len(offsets) - 1
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    payload = data if isinstance(data, pa.Buffer) else pa.py_buffer(np.ascontiguousarray(data))
    return pa.Array.from_buffers(PIECES, n, [None, pa.py_buffer(offsets), payload])


def varints(values: _U64) -> Any:
    """Each unsigned 64-bit value's base-128 varint (low group first), as a piece column.

    Values are laid out in an (n x widest) matrix, seven bits per column with the continuation
    bit set where more groups follow; a mask keeps each row's used columns.
    """
    z = np.ascontiguousarray(values, dtype=np.uint64)
    n = len(z)
    if n == 0:
        return pieces_from_buffers(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8))
    widths = np.ones(n, dtype=np.int64)
    top = int(z.max())
    width = 1
    while width < 10 and top >> (7 * width):
        widths += z >= np.uint64(1 << (7 * width))
        width += 1
    matrix = np.empty((n, width), dtype=np.uint8)
    for j in range(width):
        group = (z >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = widths > j + 1
        matrix[:, j] = group | (more.astype(np.uint64) << np.uint64(7))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    if width == 1:
        return pieces_from_buffers(offsets, matrix.reshape(-1))
    used = np.arange(width, dtype=np.int64)[None, :] < widths[:, None]
    return pieces_from_buffers(offsets, matrix[used])


def zigzag_varints(values: _I64) -> Any:
    """Each signed value's zigzag varint, as a piece column (Avro ``int`` and ``long``)."""
    return varints(zigzag(values))


def fixed_width_pieces(matrix: npt.NDArray[np.uint8] | Any, n: int, width: int) -> Any:
    """n pieces of ``width`` bytes each, read from an (n x width) matrix or a buffer, no copy."""
    offsets = np.arange(n + 1, dtype=np.int64) * width
    if isinstance(matrix, np.ndarray):
        matrix = np.ascontiguousarray(matrix).reshape(-1)
    return pieces_from_buffers(offsets, matrix)


def constant_pieces(data: bytes, n: int) -> Any:
    """The same bytes on every one of n rows."""
    one = np.frombuffer(data, dtype=np.uint8)
    return fixed_width_pieces(np.tile(one, n), n, len(data))


def as_pieces(array: Any) -> Any:
    """A binary or string array (any offset width) as a piece column; its bytes unchanged."""
    t = array.type
    if t == PIECES:
        return array
    if pa.types.is_large_string(t):
        return array.view(PIECES)
    return array.cast(PIECES)


_B = TypeVar("_B")


def encode_rows(
    array: Any, parts_of: Callable[[Any, _B, npt.NDArray[np.bool_]], Sequence[Any]], binding: _B
) -> Any:
    """One payload per row of ``array``, from the parts ``parts_of(arr, binding, valid)`` gives
    for every row; a null row stays null (a tombstone, not an encoded null)."""
    arr = plain_layout(array)
    valid = valid_mask(arr)
    pieces = join_pieces(parts_of(arr, binding, valid), len(arr))
    return pieces if arr.null_count == 0 else only_rows(pieces, valid)


def join_pieces(parts: Sequence[Any], n: int) -> Any:
    """Row i of every part, back to back; a part is a piece column or one ``bytes`` for all rows.

    Null rows of a part contribute nothing. With no parts, every row is empty.
    """
    columns = [
        binary_scalar(part, large=True) if isinstance(part, bytes) else as_pieces(part)
        for part in parts
    ]
    arrays = [c for c in columns if isinstance(c, pa.Array)]
    if not arrays:
        return constant_pieces(b"".join(parts), n)
    if len(columns) == 1:
        return pc.fill_null(arrays[0], _EMPTY) if arrays[0].null_count else arrays[0]
    if all(a.null_count for a in arrays):
        # pyarrow (26) drops the trailing rows where every input is null when skipping nulls;
        # one input without nulls (empty pieces: only an offsets buffer) keeps every row.
        columns.append(constant_pieces(b"", n))
    return pc.binary_join_element_wise(*columns, _EMPTY, null_handling="skip")


def only_rows(part: Any, keep: npt.NDArray[np.bool_], n: int | None = None) -> Any:
    """A piece column (or constant ``bytes`` on every row) with every row outside ``keep`` null.

    Zero-copy for the bytes: only a validity bitmap is built (and ANDed with the column's own).
    """
    count = len(keep) if n is None else n
    column = constant_pieces(part, count) if isinstance(part, bytes) else as_pieces(part)
    if column.offset:
        column = pa.concat_arrays([column])  # the bitmap below starts at row 0 of the buffers
    if column.null_count:
        keep = keep & valid_mask(column)
    bitmap = pa.py_buffer(np.packbits(keep, bitorder="little"))
    _validity, offsets, data = column.buffers()
    return pa.Array.from_buffers(PIECES, count, [bitmap, offsets, data])


def group_pieces(items: Any, list_offsets: npt.NDArray[Any]) -> Any:
    """Per parent row, the concatenated pieces of its items ``list_offsets[i]:[i + 1]``.

    The items' bytes are consecutive in their data buffer, so each parent's bytes are a slice
    of it: the result shares that buffer and only gathers offsets. ``items`` must have no nulls.
    """
    item_offsets = binary_offsets(items).astype(np.int64, copy=False)
    grouped = item_offsets[np.asarray(list_offsets, dtype=np.int64)]
    data = items.buffers()[2]
    if data is None:
        data = pa.py_buffer(b"")
    return pieces_from_buffers(grouped, data)


def length_prefixed(values: Any) -> Any:
    """Each row's bytes after the zigzag varint of their length (Avro ``string``/``bytes``).

    ``values``: a binary, large binary, string or large string array; null rows stay null.
    """
    arr = as_pieces(values)
    offsets = binary_offsets(arr).astype(np.int64, copy=False)
    prefix = zigzag_varints(np.diff(offsets))
    joined = pc.binary_join_element_wise(prefix, arr, _EMPTY, null_handling="emit_null")
    return joined


def plain_layout(arr: Any) -> Any:
    """The array in the form the encoders read: no dictionary, view or fixed-size layouts."""
    t = arr.type
    if pa.types.is_dictionary(t):
        return plain_layout(arr.dictionary_decode())
    if pa.types.is_string_view(t):
        return arr.cast(pa.large_string())
    if pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.large_binary())
    if pa.types.is_fixed_size_list(t):
        return arr.cast(pa.large_list(t.value_field))
    if pa.types.is_float16(t):
        return arr.cast(pa.float32())
    return arr


def list_offsets(arr: Any) -> npt.NDArray[np.int64]:
    """A list (or map) array's n + 1 offsets into its values, its slice offset applied."""
    n = len(arr)
    dtype = np.int64 if pa.types.is_large_list(arr.type) else np.int32
    raw: npt.NDArray[Any] = np.frombuffer(arr.buffers()[1], dtype=dtype, count=arr.offset + n + 1)
    return raw[arr.offset :].astype(np.int64)


def micros(arr: Any) -> _I64:
    """A timestamp or duration column as int64 microseconds (floored, as Spark does)."""
    multiplier, divisor = _TO_MICROS[arr.type.unit]
    return int_column(arr.view(pa.int64()), 0, np.int64) * multiplier // divisor


def boolean_bytes(arr: Any) -> Any:
    """A boolean column as one byte (0 or 1) per row; null rows read as 0."""
    n = len(arr)
    bits = np.unpackbits(
        np.frombuffer(arr.buffers()[1], dtype=np.uint8), count=arr.offset + n, bitorder="little"
    )[arr.offset :]
    return fixed_width_pieces(bits, n, 1)


def little_endian_floats(arr: Any, width: int) -> Any:
    """A float or double column as ``width``-byte little-endian IEEE values (4 or 8)."""
    n = len(arr)
    source = np.dtype(np.float32 if pa.types.is_float32(arr.type) else np.float64)
    values = np.frombuffer(arr.buffers()[1], dtype=source, count=arr.offset + n)[arr.offset :]
    target = np.dtype("<f4" if width == 4 else "<f8")
    return fixed_width_pieces(values.astype(target, copy=False).view(np.uint8), n, width)
