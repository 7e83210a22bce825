"""Confluent's Schema Registry wire format: the header framed before each payload.

Role: what a registry-aware reader expects in a record's key or value: the magic byte ``0``, the
schema id as a big-endian 4-byte integer, then (Protobuf only) the message-index list naming the
message type within the schema file, then the payload. ``frame`` puts that header before a
single payload; ``frame_column`` does it for a whole column at once (one constant header joined
to every row, no per-row Python); ``message_indexes`` encodes Protobuf's list (the zigzag varint
count, then each index as a zigzag varint; the first message, ``[0]``, is the single byte
``0``); ``parse_header`` reads a header back (tests, diagnostics).

Headers alone need no numpy (``frame_column`` loads the columnar primitives when called).

Invariants: the schema id is a registry id in ``[0, 2**31)``, checked when a header is built;
a null row of a column stays null (a tombstone gets no header).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kafka_sink.records.batch import encode_varint as zigzag_varint

__all__ = ["MAGIC_BYTE", "frame", "frame_column", "header", "message_indexes", "parse_header"]

MAGIC_BYTE = 0
_ID = struct.Struct(">bI")
_MAX_ID = (1 << 31) - 1


def message_indexes(indexes: Sequence[int]) -> bytes:
    """Protobuf's message-index list: the path of the message type among the file's types."""
    if list(indexes) == [0]:
        return b"\x00"
    return b"".join(zigzag_varint(i) for i in (len(indexes), *indexes))


def header(schema_id: int, indexes: Sequence[int] | None = None) -> bytes:
    """Magic byte, schema id and, for Protobuf, the message-index list."""
    if type(schema_id) is not int or not 0 <= schema_id <= _MAX_ID:
        raise ValueError(f"a schema id is an int in [0, {_MAX_ID}], not {schema_id!r}")
    out = _ID.pack(MAGIC_BYTE, schema_id)
    return out if indexes is None else out + message_indexes(indexes)


def frame(schema_id: int, payload: bytes, indexes: Sequence[int] | None = None) -> bytes:
    """One payload in the wire format."""
    return header(schema_id, indexes) + payload


def frame_column(payloads: Any, schema_id: int, indexes: Sequence[int] | None = None) -> Any:
    """Every payload of an Arrow binary column framed (``large_binary``); nulls stay null."""
    # Imported here so the driver builds headers without loading numpy or pyarrow.compute.
    import pyarrow.compute as pc

    from kafka_sink.formats.columnar import NULL_PIECE, join_pieces

    prefix = header(schema_id, indexes)
    joined = join_pieces([prefix, payloads], len(payloads))
    if payloads.null_count == 0:
        return joined
    return pc.if_else(pc.is_valid(payloads), joined, NULL_PIECE)


def parse_header(data: bytes) -> tuple[int, int]:
    """(schema id, offset of what follows) of a framed payload; ValueError if not framed."""
    if len(data) < _ID.size or data[0] != MAGIC_BYTE:
        raise ValueError("not in Confluent's wire format (magic byte 0, then a 4-byte id)")
    _magic, schema_id = _ID.unpack_from(data)
    return schema_id, _ID.size
