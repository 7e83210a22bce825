"""Protobuf binary encoding of whole Arrow columns: one message payload per row, built in bulk.

Role: the executor-side half of the Protobuf format. ``encode_column(array, binding)`` turns an
Arrow struct column (the ``value`` or ``key`` column of the batch Spark hands a task) into a
``large_binary`` array of serialized messages, one per row, following the ``ProtoBinding``
that ``protobuf_schema.bind_protobuf`` built. ``ProtobufColumnEncoder`` binds a schema to each
Arrow type it meets once and encodes batch after batch with that plan.

How: every field becomes *piece columns* (``formats.columnar``), joined per row: the field's
tag (a constant varint of ``number << 3 | wire type``) then its value. Varint types are numpy
varints of the values as unsigned 64-bit (a negative int32 takes ten bytes, as Protobuf
sign-extends it); floats and doubles are the Arrow buffer read as little-endian bytes; strings
and bytes are a length varint joined to the Arrow data; decimals are Arrow's decimal-to-string
cast; dates are days, timestamps microseconds. A field is written on the rows where it is
present: an ``optional`` field where the value is not null, an implicit-presence field where it
is not its default (0, false, "", +0.0, as Protobuf skips it), a message field where the
struct is not null (its body joined first, then prefixed with its length). Numeric
``repeated`` fields are packed (one tag and length per row, the items' varints or fixed bytes
grouped per row by the list offsets, zero-copy); string, bytes and message ``repeated``
fields are one tagged item each, grouped the same way; a map is a repeated entry message of
its key (field 1) and value (field 2), both always written, as Protobuf's own encoder writes
map entries. Nothing loops over rows in Python and every Spark type has a bulk path, so no
per-row fallback is needed; the per-row path for single Python objects is the producer
serializer (``formats.protobuf_serializer``, over the ``protobuf`` library).

Invariants: each payload equals, byte for byte, what the ``protobuf`` library's
``SerializeToString`` writes for the same row (fields in number order; the tests hold the two
to it on random data, except the order of map entries, which Protobuf leaves unspecified: the
encoder keeps the Arrow order); a null input row is a null output row (a tombstone, never
encoded); a null in a non-nullable field, an array element or a map value raises
:class:`~kafka_sink.sink_errors.SinkDataError` naming the field path and the row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.formats.base import ColumnEncoder
from kafka_sink.formats.columnar import (
    as_pieces,
    boolean_bytes,
    encode_rows,
    group_pieces,
    join_pieces,
    list_offsets,
    little_endian_floats,
    micros,
    only_rows,
    plain_layout,
    varints,
)
from kafka_sink.formats.protobuf_schema import (
    VARINT_TYPES,
    ProtoBinding,
    ProtoField,
    ProtoSchema,
    bind_protobuf,
)
from kafka_sink.formats.sql_types import SqlType
from kafka_sink.records.arrow import binary_offsets, int_column, valid_mask
from kafka_sink.sink_errors import SinkDataError

__all__ = ["ProtobufColumnEncoder", "encode_column"]

_Mask = npt.NDArray[np.bool_]
_Parts = list[Any]
_WIRE_TYPES = {"float": 5, "double": 1}  # the varint types are 0, the rest 2 (length-delimited)


class ProtobufColumnEncoder(ColumnEncoder[ProtoSchema, ProtoBinding]):
    """Encodes struct columns with one Protobuf message; binds it once per Arrow type.

    Picklable (the schema travels as its tree); build it on the driver, use it in tasks.
    """

    def _bind(self, sql_type: SqlType) -> ProtoBinding:
        return bind_protobuf(sql_type, self.schema, self.path)

    def _encode_bound(self, array: Any, binding: ProtoBinding) -> Any:
        return encode_column(array, binding)


def encode_column(array: Any, binding: ProtoBinding) -> Any:
    """One serialized message per row of the struct ``array``; a null row stays null."""
    return encode_rows(array, _message, binding)


def _uvarint(value: int) -> bytes:
    """One unsigned varint (a tag), by the column primitive."""
    one: bytes = varints(np.array([value], dtype=np.uint64))[0].as_py()
    return one


def _tag(number: int, proto_type: str, packed: bool = False) -> bytes:
    wire = 2 if packed else _WIRE_TYPES.get(proto_type, 0 if proto_type in VARINT_TYPES else 2)
    return _uvarint(number << 3 | wire)


def _lengths(pieces: Any) -> npt.NDArray[np.int64]:
    offsets: npt.NDArray[np.int64] = binary_offsets(pieces).astype(np.int64)
    return offsets[1:] - offsets[:-1]


def _delimited(parts: _Parts, n: int) -> _Parts:
    """The parts joined and preceded by the varint of their length (a length-delimited value)."""
    body = join_pieces(parts, n)
    return [varints(_lengths(body).astype(np.uint64)), body]


def _message(arr: Any, b: ProtoBinding, live: _Mask) -> _Parts:
    """The parts of every row's message body; only ``live`` rows must be right."""
    fields = arr.flatten()  # the struct's slice and validity applied to each child
    parts: _Parts = []
    for pf, source, kind, child in zip(
        b.message.fields, b.sources, b.kinds, b.children, strict=True
    ):
        values = plain_layout(fields[source])
        path = f"{b.path}.{pf.name}"
        if pf.label in ("repeated", "map"):
            parts.append(_repeated(values, pf, kind, child, live, path=path))
        else:
            parts.append(_single(values, pf, kind, child, live, path=path))
    return parts


def _refuse_nulls(bad: _Mask, path: str, what: str) -> None:
    if bad.any():
        row = int(np.argmax(bad))
        raise SinkDataError(
            f"{path}: row {row} holds a null {what}, which Protobuf cannot write. Fix: fill "
            "the nulls (coalesce), filter them out, or make the Spark field nullable"
        )


def _single(
    values: Any, pf: ProtoField, kind: str, child: ProtoBinding | None, live: _Mask, *, path: str
) -> Any:
    """A non-repeated field: tag and value on the rows where it is present, else null."""
    n = len(values)
    valid = valid_mask(values)
    if pf.label == "implicit" and child is None:
        _refuse_nulls(live & ~valid, path, "value in a non-nullable field")
    present = live & valid
    if child is not None:
        body = _delimited(_message(values, child, present), n)
        return only_rows(join_pieces([_tag(pf.number, "message"), *body], n), present)
    value, default = _scalar(values, pf.type, kind)
    if pf.label == "implicit":
        present &= ~default
    return only_rows(join_pieces([_tag(pf.number, pf.type), *value], n), present)


def _repeated(
    values: Any, pf: ProtoField, kind: str, child: ProtoBinding | None, live: _Mask, *, path: str
) -> Any:
    """A repeated or map field per row: its items grouped by the list offsets."""
    n = len(values)
    present = live & valid_mask(values)
    offsets = list_offsets(values)
    first, last = int(offsets[0]), int(offsets[-1])
    count = last - first
    counts = np.diff(offsets)
    item_live = np.repeat(present, counts)
    if pf.label == "map":
        keys = plain_layout(values.keys.slice(first, count))
        items = plain_layout(values.items.slice(first, count))
        _refuse_nulls(item_live & ~valid_mask(items), path, "map value")
        key, _ = _scalar(keys, pf.key_type or "string", "scalar")
        entry = [
            _tag(1, pf.key_type or "string"),
            *key,
            *_entry_value(items, pf, kind, child, item_live),
        ]
        pieces = [_tag(pf.number, "message"), *_delimited(entry, count)]
    else:
        items = plain_layout(values.values.slice(first, count))
        _refuse_nulls(item_live & ~valid_mask(items), path, "array element")
        if child is not None:
            pieces = [
                _tag(pf.number, "message"),
                *_delimited(_message(items, child, item_live), count),
            ]
        elif pf.type in ("string", "bytes"):
            pieces = [_tag(pf.number, pf.type), *_scalar(items, pf.type, kind)[0]]
        else:  # packed: one tag and length per row around all its items
            grouped = group_pieces(
                join_pieces(_scalar(items, pf.type, kind)[0], count), offsets - first
            )
            packed = [_tag(pf.number, pf.type, packed=True), *_delimited([grouped], n)]
            return only_rows(join_pieces(packed, n), present & (counts > 0))
    grouped = group_pieces(join_pieces(pieces, count), offsets - first)
    return only_rows(grouped, present)


def _entry_value(
    items: Any, pf: ProtoField, kind: str, child: ProtoBinding | None, live: _Mask
) -> _Parts:
    count = len(items)
    if child is not None:
        body = _message(items, child, live)
        return [_tag(2, "message"), *_delimited(body, count)]
    return [_tag(2, pf.type), *_scalar(items, pf.type, kind)[0]]


def _scalar(arr: Any, proto_type: str, kind: str) -> tuple[_Parts, _Mask]:
    """A scalar column's value encodings (untagged), and where each value is the default."""
    if kind == "decimal":
        text = pc.cast(arr, pa.large_string())
        return _scalar(text, "string", "scalar")
    if proto_type in ("string", "bytes"):
        data = as_pieces(arr)
        lengths = _lengths(data)
        return [varints(lengths.astype(np.uint64)), data], lengths == 0
    if proto_type in ("float", "double"):
        width = 4 if proto_type == "float" else 8
        pieces = little_endian_floats(arr, width)
        raw = np.frombuffer(pieces.buffers()[2], dtype=np.uint32 if width == 4 else np.uint64)
        return [pieces], raw[: len(arr)] == 0  # +0.0 only: -0.0 is written, as Protobuf does
    if proto_type == "bool":
        pieces = boolean_bytes(arr)
        return [pieces], np.frombuffer(pieces.buffers()[2], dtype=np.uint8)[: len(arr)] == 0
    ints = _integers(arr, kind)
    return [varints(ints.view(np.uint64))], ints == 0


def _integers(arr: Any, kind: str) -> npt.NDArray[np.int64]:
    if kind == "timestamp":
        return micros(arr).astype(np.int64, copy=False)
    t = arr.type
    if pa.types.is_date32(t):
        return int_column(arr.view(pa.int32()), 0, np.int64)
    if pa.types.is_date64(t):
        return int_column(arr.view(pa.int64()), 0, np.int64) // 86_400_000
    return int_column(arr, 0, np.int64)
