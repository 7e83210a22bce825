"""Avro binary encoding of whole Arrow columns: one payload per row, built in bulk.

Role: the executor-side half of the Avro format. ``encode_column(array, binding)`` turns an
Arrow column (typically a struct array, the ``value`` or ``key`` column of the batch Spark
hands a task) into a ``large_binary`` array of Avro binary payloads, one per row, following
the ``Binding`` that ``avro_schema.bind`` built on the driver. ``AvroColumnEncoder`` binds a
schema to each Arrow type it meets once and encodes batch after batch with that plan.

How: each Avro value becomes a *piece column* (``formats.columnar``): ints and longs are zigzag
varints computed with numpy; floats and doubles are the Arrow buffer itself, read as bytes;
booleans are one byte per row; strings and bytes are a length varint joined to the Arrow data;
decimals are the Arrow decimal words turned big-endian (two's complement, in the fewest bytes
for ``bytes`` as fastavro and confluent-kafka write them, sign-extended to the size for
``fixed``); dates are ints; timestamps are longs in the schema's unit (floored, as Spark does);
enums are the index of each string among the symbols; a union's branch index is a constant
varint before the value, the null branch's alone on null rows (the value's pieces made null
there by a validity bitmap); a record passes its fields' pieces up, so a whole nesting of
records is joined once per row; arrays and maps encode all their items as one piece column,
then group each row's items (zero-copy, by the list offsets) between the item count and the 0
that ends the blocks. Nothing loops over rows in Python. Every Spark type has a bulk encoder;
Arrow types that Spark never produces (view, dictionary, fixed-size list and large variants)
are cast to their plain form first. The per-row path for single Python objects is the
producer serializer (``formats.avro_serializer``, over fastavro).

Invariants: each payload equals, byte for byte, what fastavro's ``schemaless_writer`` writes for
the same row (the tests hold the two to it on random data); a null input row is a null output
row (a tombstone, never encoded); a null reaching an Avro type without null, an enum string that
is not a symbol, or a binary value of the wrong size for a fixed, raises
:class:`~kafka_sink.sink_errors.SinkDataError` naming the field path and the row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.formats.avro_schema import (
    AvroArray,
    AvroEnum,
    AvroFixed,
    AvroMap,
    AvroPrimitive,
    AvroRecord,
    AvroSchema,
    Binding,
    bind,
)
from kafka_sink.formats.base import ColumnEncoder
from kafka_sink.formats.columnar import (
    as_pieces,
    boolean_bytes,
    encode_rows,
    fixed_width_pieces,
    group_pieces,
    join_pieces,
    list_offsets,
    little_endian_floats,
    micros,
    only_rows,
    pieces_from_buffers,
    plain_layout,
    zigzag_varints,
)
from kafka_sink.formats.sql_types import SqlType
from kafka_sink.records.arrow import binary_offsets, binary_scalar, int_column, valid_mask
from kafka_sink.records.batch import encode_varint as zigzag_varint
from kafka_sink.sink_errors import SinkDataError

__all__ = ["AvroColumnEncoder", "encode_column"]

_Mask = npt.NDArray[np.bool_]
#: What an encoder returns for a column: piece columns and constant bytes, joined per row later.
_Parts = list[Any]


class AvroColumnEncoder(ColumnEncoder[AvroSchema, Binding]):
    """Encodes columns with one Avro schema; binds it once per Arrow type it is given.

    Picklable (the schema travels as its JSON); build it on the driver, use it in tasks.
    """

    def _bind(self, sql_type: SqlType) -> Binding:
        return bind(sql_type, self.schema, self.path)

    def _encode_bound(self, array: Any, binding: Binding) -> Any:
        return encode_column(array, binding)


def encode_column(array: Any, binding: Binding) -> Any:
    """One Avro payload per row of ``array`` (``large_binary``); a null row stays null.

    A null row is a tombstone, not an encoded null, even when the schema's root is a union
    with null (as Confluent's serializers leave None unserialized).
    """
    return encode_rows(array, _encode, binding)


def _encode(arr: Any, b: Binding, live: _Mask) -> _Parts:
    """The parts of every row of ``arr``: piece columns and constants, joined by the caller.

    Only ``live`` rows must be right (the others are dropped by a parent). Joining once per
    record or array level, not per field, keeps each byte's copies few.
    """
    arr = plain_layout(arr)
    n = len(arr)
    valid = valid_mask(arr)
    if b.branch is None or b.null_branch is None:
        _refuse_nulls(b, live & ~valid)
    if b.branch is not None and b.branch == b.null_branch:
        return [zigzag_varint(b.branch)]
    value = _value(arr, b, live & valid)
    if b.branch is None:
        return value
    tag = zigzag_varint(b.branch)
    if arr.null_count == 0 or b.null_branch is None:
        return [tag, *value]
    null_tag = binary_scalar(zigzag_varint(b.null_branch), large=True)
    tags = pc.if_else(pc.is_valid(arr), binary_scalar(tag, large=True), null_tag)
    return [tags, *(only_rows(part, valid, n) for part in value)]


def _refuse_nulls(b: Binding, bad: _Mask) -> None:
    if bad.any():
        row = int(np.argmax(bad))
        raise SinkDataError(
            f"{b.path}: row {row} is null, but Avro {b.avro.describe()} cannot hold null. "
            "Fix: fill the nulls (coalesce) or make the Avro type a union with null"
        )


def _value(arr: Any, b: Binding, live: _Mask) -> _Parts:
    avro = b.avro
    if isinstance(avro, AvroRecord):
        return _record(arr, b, live)
    if isinstance(avro, AvroArray):
        return _list(arr, arr.values, b.children[0], live, key=None)
    if isinstance(avro, AvroMap):
        return _list(arr, arr.items, b.children[0], live, key=arr.keys)
    if isinstance(avro, AvroEnum):
        return [_enum(arr, b, live)]
    if isinstance(avro, AvroFixed):
        if avro.logical == "decimal":
            return [_fixed_decimal(arr, avro.size)]
        return [_fixed(arr, b, avro.size, live)]
    assert isinstance(avro, AvroPrimitive), "a binding's type is never a union"
    if avro.logical == "decimal":
        return _bytes_decimal(arr)
    kind = avro.type
    if kind == "null":
        return []
    if kind == "boolean":
        return [boolean_bytes(arr)]
    if kind in ("int", "long"):
        return [zigzag_varints(_integers(arr, avro))]
    if kind in ("float", "double"):
        return [little_endian_floats(arr, 4 if kind == "float" else 8)]
    return _length_prefixed(arr)  # string, bytes


def _length_prefixed(arr: Any) -> _Parts:
    data = as_pieces(arr)
    offsets = binary_offsets(data).astype(np.int64)
    return [zigzag_varints(offsets[1:] - offsets[:-1]), data]


def _record(arr: Any, b: Binding, live: _Mask) -> _Parts:
    fields = arr.flatten()  # the struct's slice and validity applied to each child
    parts: _Parts = []
    for child, source in zip(b.children, b.sources, strict=True):
        if source is None:
            assert child.branch is not None
            parts.append(zigzag_varint(child.branch))
        else:
            parts.extend(_encode(fields[source], child, live))
    return parts


def _list(arr: Any, values: Any, items: Binding, live: _Mask, key: Any) -> _Parts:
    """An Avro array (or map: ``key`` given) per row: count, items, 0; or 0 when empty."""
    n = len(arr)
    offsets = list_offsets(arr)
    first, last = int(offsets[0]), int(offsets[-1])
    counts = np.diff(offsets)
    item_live = np.repeat(live, counts)
    parts = _encode(values.slice(first, last - first), items, item_live)
    if key is not None:
        parts = [*_length_prefixed(key.slice(first, last - first)), *parts]
    grouped = group_pieces(join_pieces(parts, last - first), offsets - first)
    ends = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts > 0, out=ends[1:])
    terminators = pieces_from_buffers(ends, np.zeros(int(ends[-1]), dtype=np.uint8))
    return [zigzag_varints(counts), grouped, terminators]


def _integers(arr: Any, avro: AvroPrimitive) -> npt.NDArray[np.int64]:
    t = arr.type
    if pa.types.is_timestamp(t):
        values = micros(arr)
        if avro.logical in ("timestamp-millis", "local-timestamp-millis"):
            values //= 1000
        return values
    if pa.types.is_date32(t):
        return int_column(arr.view(pa.int32()), 0, np.int64)
    if pa.types.is_date64(t):
        return int_column(arr.view(pa.int64()), 0, np.int64) // 86_400_000
    if pa.types.is_duration(t):
        return micros(arr)
    return int_column(arr, 0, np.int64)


def _enum(arr: Any, b: Binding, live: _Mask) -> Any:
    assert isinstance(b.avro, AvroEnum)
    symbols = pa.array(list(b.avro.symbols), type=pa.string())
    text = arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    index = pc.index_in(text, value_set=symbols.cast(pa.large_string()))
    unknown = live & ~valid_mask(index)
    if unknown.any():
        row = int(np.argmax(unknown))
        raise SinkDataError(
            f"{b.path}: row {row} holds {str(text[row].as_py())[:100]!r}, which is not a symbol "
            f"of Avro {b.avro.describe()} {list(b.avro.symbols)[:20]}. Fix: map the value to a "
            "symbol, or add the symbol to the schema"
        )
    return zigzag_varints(int_column(index, 0, np.int64))


def _fixed(arr: Any, b: Binding, size: int, live: _Mask) -> Any:
    data = as_pieces(arr)
    lengths = np.diff(binary_offsets(data).astype(np.int64))
    wrong = live & (lengths != size)
    if wrong.any():
        row = int(np.argmax(wrong))
        raise SinkDataError(
            f"{b.path}: row {row} has {int(lengths[row])} bytes, but Avro {b.avro.describe()} "
            f"takes exactly {size}. Fix: pad or trim the values, or use Avro bytes"
        )
    return data


def _decimal_words(arr: Any) -> npt.NDArray[np.uint8]:
    """Each decimal's unscaled value as its Arrow word: an (n x byte width) little-endian matrix."""
    n = len(arr)
    width = arr.type.byte_width
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=(arr.offset + n) * width)
    return raw[arr.offset * width :].reshape(n, width)


def _fixed_decimal(arr: Any, size: int) -> Any:
    """Decimals as an Avro fixed: two's complement big-endian, sign-extended to ``size``."""
    n = len(arr)
    width = arr.type.byte_width
    big = _decimal_words(arr)[:, ::-1]
    if size <= width:  # the binding checked that the precision fits in size bytes
        return fixed_width_pieces(big[:, width - size :], n, size)
    sign = np.where(big[:, :1] >= 0x80, np.uint8(0xFF), np.uint8(0))
    return fixed_width_pieces(np.hstack([np.repeat(sign, size - width, axis=1), big]), n, size)


def _bytes_decimal(arr: Any) -> _Parts:
    """Decimals as Avro bytes: a length, then the fewest bytes as fastavro writes them."""
    n = len(arr)
    width = arr.type.byte_width
    little = _decimal_words(arr)
    big = little[:, ::-1]
    widths = _decimal_widths(little)
    used = np.arange(width)[None, :] >= (width - widths)[:, None]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    return [zigzag_varints(widths), pieces_from_buffers(offsets, big[used])]


def _decimal_widths(little: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """Bytes of each value as fastavro writes a bytes decimal: (bit length of |v| + 8) // 8.

    That is the magnitude's byte count, plus one when its top byte's high bit is set (so
    -128 takes two bytes, as in fastavro, where Java's BigInteger takes one).
    """
    n, width = little.shape
    limbs = np.ascontiguousarray(little).view(np.uint64).reshape(n, width // 8).copy()
    negative = little[:, -1] >= 0x80
    if negative.any():
        neg = limbs[negative]
        neg = ~neg
        carry = np.ones(len(neg), dtype=np.bool_)
        for j in range(neg.shape[1]):  # add one, low limb first
            neg[:, j] += carry.astype(np.uint64)
            carry &= neg[:, j] == 0
        limbs[negative] = neg
    magnitude = limbs.view(np.uint8).reshape(n, width)[:, ::-1]
    nonzero = magnitude != 0
    leading = np.where(nonzero.any(axis=1), np.argmax(nonzero, axis=1), width)
    top = magnitude[np.arange(n), np.minimum(leading, width - 1)]
    widths: npt.NDArray[np.int64] = (width - leading) + (top >= 0x80)
    return np.maximum(widths, 1).astype(np.int64)
