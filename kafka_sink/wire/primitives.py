"""Kafka protocol primitive types: a :class:`Writer` that builds bytes and a :class:`Reader` that
parses them.

Role: the lowest layer of the wire format (fixed-width big-endian integers, unsigned and zigzag
varints, plain and compact strings/bytes/arrays, UUIDs, tagged-field sections). Message layouts
live in :mod:`kafka_sink.wire.schema`; this module knows nothing about APIs or versions.

Invariants:
- Pure: no I/O, no clocks, no threads.
- :class:`Writer` never copies a large byte string on the way in: values of at least
  ``Writer.REF_THRESHOLD`` bytes (record batches) are kept by reference and copied exactly once,
  by :meth:`Writer.getvalue` (or :meth:`Writer.getvalue_framed`, which also adds the int32 size).
- :class:`Reader` reads from a ``memoryview`` without copying until a value is materialised; any
  read past the end, negative length other than the null marker, or over-long varint raises
  :class:`~kafka_sink.errors.ProtocolError` (never ``struct.error`` or ``IndexError``).
- Compact lengths are unsigned varints of N+1 (0 = null); record-level integers are zigzag
  varints. The two encoders are separate functions on purpose.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence

from kafka_sink.errors import ProtocolError

__all__ = [
    "ZERO_UUID",
    "Reader",
    "Writer",
    "decode_uvarint",
    "decode_varint",
    "encode_uvarint",
    "encode_varint",
    "zigzag_decode",
    "zigzag_encode",
]

ZERO_UUID = uuid.UUID(int=0)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def zigzag_encode(value: int, bits: int = 64) -> int:
    """Map a signed integer onto an unsigned one (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128: 7 bits per byte, least significant group first."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varlong (covers varint too: the encoding of an int32 is identical)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of range: {value}")
    return encode_uvarint(zigzag_encode(value, 64))


def decode_uvarint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; returns (value, new position)."""
    result = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise ProtocolError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("varint longer than 10 bytes")


def decode_varint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag varint/varlong at ``pos``; returns (value, new position)."""
    raw, pos = decode_uvarint(data, pos)
    value = zigzag_decode(raw)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ProtocolError("varlong out of range")
    return value, pos


class Writer:
    """Append-only encoder. Small values go into a bytearray; big byte strings are referenced."""

    __slots__ = ("_buf", "_chunks", "_size_before_buf")

    REF_THRESHOLD = 4096

    def __init__(self) -> None:
        self._buf = bytearray()
        # Completed pieces, in order; the current bytearray always comes after them.
        self._chunks: list[bytes | bytearray | memoryview] = []
        self._size_before_buf = 0

    def __len__(self) -> int:
        return self._size_before_buf + len(self._buf)

    def getvalue(self) -> bytes:
        if not self._chunks:
            return bytes(self._buf)
        return b"".join([*self._chunks, self._buf])

    def getvalue_framed(self) -> bytes:
        """The bytes prefixed with their int32 length (a Kafka frame), with a single copy."""
        size = len(self)
        if size > _INT32_MAX:
            raise ProtocolError(f"frame of {size} bytes does not fit an int32 size")
        return b"".join([_I32.pack(size), *self._chunks, self._buf])

    # -- fixed width ---------------------------------------------------------------------------
    def int8(self, value: int) -> None:
        self._buf += _I8.pack(value)

    def int16(self, value: int) -> None:
        self._buf += _I16.pack(value)

    def int32(self, value: int) -> None:
        self._buf += _I32.pack(value)

    def int64(self, value: int) -> None:
        self._buf += _I64.pack(value)

    def uint16(self, value: int) -> None:
        self._buf += _U16.pack(value)

    def uint32(self, value: int) -> None:
        self._buf += _U32.pack(value)

    def float64(self, value: float) -> None:
        self._buf += _F64.pack(value)

    def boolean(self, value: bool) -> None:
        self._buf.append(1 if value else 0)

    def uuid(self, value: uuid.UUID | None) -> None:
        self._buf += (value or ZERO_UUID).bytes

    # -- varints -------------------------------------------------------------------------------
    def uvarint(self, value: int) -> None:
        if 0 <= value < 0x80:
            self._buf.append(value)
        else:
            self._buf += encode_uvarint(value)

    def varint(self, value: int) -> None:
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise ValueError(f"varint out of range: {value}")
        self._buf += encode_uvarint(zigzag_encode(value, 32))

    def varlong(self, value: int) -> None:
        self._buf += encode_varint(value)

    # -- raw bytes -----------------------------------------------------------------------------
    def raw(self, data: bytes | bytearray | memoryview) -> None:
        if len(data) >= self.REF_THRESHOLD:
            self._chunks.append(self._buf)
            self._chunks.append(data)
            self._size_before_buf += len(self._buf) + len(data)
            self._buf = bytearray()
        else:
            self._buf += data

    # -- strings and bytes ---------------------------------------------------------------------
    def string(self, value: str | None, *, compact: bool = False, nullable: bool = False) -> None:
        if value is None:
            self._null(compact, nullable, 2, "string")
            return
        data = value.encode()
        if compact:
            self.uvarint(len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise ProtocolError(f"string of {len(data)} bytes does not fit an int16 length")
            self._buf += _I16.pack(len(data))
        self._buf += data

    def bytes_(
        self,
        value: bytes | bytearray | memoryview | None,
        *,
        compact: bool = False,
        nullable: bool = False,
    ) -> None:
        if value is None:
            self._null(compact, nullable, 4, "bytes")
            return
        if compact:
            self.uvarint(len(value) + 1)
        else:
            self._buf += _I32.pack(len(value))
        self.raw(value)

    def array_length(self, length: int | None, *, compact: bool = False) -> None:
        """The length prefix of an array; None encodes null (nullability is checked by callers)."""
        if length is None:
            if compact:
                self._buf.append(0)
            else:
                self._buf += _I32.pack(-1)
        elif compact:
            self.uvarint(length + 1)
        else:
            self._buf += _I32.pack(length)

    def _null(self, compact: bool, nullable: bool, width: int, kind: str) -> None:
        if not nullable:
            raise ProtocolError(f"null {kind} in a non-nullable field")
        if compact:
            self._buf.append(0)
        elif width == 2:
            self._buf += _I16.pack(-1)
        else:
            self._buf += _I32.pack(-1)

    # -- tagged fields -------------------------------------------------------------------------
    def tagged_fields(self, fields: Sequence[tuple[int, bytes]] = ()) -> None:
        """A TAGGED_FIELDS section from encoded (tag, value) pairs in ascending tag order."""
        if not fields:
            self._buf.append(0)
            return
        self.uvarint(len(fields))
        previous = -1
        for tag, value in fields:
            if tag <= previous:
                raise ProtocolError("tagged fields must be written in strictly ascending tag order")
            previous = tag
            self.uvarint(tag)
            self.uvarint(len(value))
            self.raw(value)

    def int32_array(self, values: Iterable[int], count: int, *, compact: bool = False) -> None:
        self.array_length(count, compact=compact)
        if count:
            self._buf += struct.pack(f">{count}i", *values)


class Reader:
    """Sequential decoder over a memoryview; ``pos`` is the offset of the next unread byte."""

    __slots__ = ("_data", "_end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._data = data if isinstance(data, memoryview) else memoryview(data)
        if self._data.format != "B" or self._data.ndim != 1:
            self._data = self._data.cast("B")
        self._end = len(self._data)
        self.pos = pos

    @property
    def remaining(self) -> int:
        return self._end - self.pos

    def _take(self, size: int) -> int:
        """Advance by ``size`` bytes and return the start offset, or raise when too short."""
        start = self.pos
        end = start + size
        if size < 0 or end > self._end:
            raise ProtocolError(
                f"truncated data: need {size} bytes at offset {start}, have {self._end - start}"
            )
        self.pos = end
        return start

    # -- fixed width ---------------------------------------------------------------------------
    def int8(self) -> int:
        v: int = _I8.unpack_from(self._data, self._take(1))[0]
        return v

    def int16(self) -> int:
        v: int = _I16.unpack_from(self._data, self._take(2))[0]
        return v

    def int32(self) -> int:
        v: int = _I32.unpack_from(self._data, self._take(4))[0]
        return v

    def int64(self) -> int:
        v: int = _I64.unpack_from(self._data, self._take(8))[0]
        return v

    def uint16(self) -> int:
        v: int = _U16.unpack_from(self._data, self._take(2))[0]
        return v

    def uint32(self) -> int:
        v: int = _U32.unpack_from(self._data, self._take(4))[0]
        return v

    def float64(self) -> float:
        v: float = _F64.unpack_from(self._data, self._take(8))[0]
        return v

    def boolean(self) -> bool:
        return self._data[self._take(1)] != 0

    def uuid(self) -> uuid.UUID:
        start = self._take(16)
        return uuid.UUID(bytes=bytes(self._data[start : start + 16]))

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        """Several fixed-width values at once (a fast path for runs of fixed fields)."""
        values: tuple[int, ...] = fmt.unpack_from(self._data, self._take(fmt.size))
        return values

    # -- varints -------------------------------------------------------------------------------
    def uvarint(self) -> int:
        pos = self.pos
        if pos < self._end:
            byte = self._data[pos]
            if byte < 0x80:
                self.pos = pos + 1
                return byte
        value, self.pos = decode_uvarint(self._data, pos)
        return value

    def varint(self) -> int:
        value, pos = decode_varint(self._data, self.pos)
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise ProtocolError("varint out of int32 range")
        self.pos = pos
        return value

    def varlong(self) -> int:
        value, self.pos = decode_varint(self._data, self.pos)
        return value

    # -- raw bytes -----------------------------------------------------------------------------
    def raw(self, size: int) -> memoryview:
        start = self._take(size)
        return self._data[start : start + size]

    def skip(self, size: int) -> None:
        self._take(size)

    # -- strings and bytes ---------------------------------------------------------------------
    def _length(self, compact: bool, width: int) -> int:
        """A length prefix; -1 means null."""
        if compact:
            return self.uvarint() - 1
        length = self.int16() if width == 2 else self.int32()
        if length < -1:
            raise ProtocolError(f"negative length {length}")
        return length

    def string(self, compact: bool = False, nullable: bool = False) -> str | None:
        length = self._length(compact, 2)
        if length == -1:
            if not nullable:
                raise ProtocolError("null in a non-nullable string field")
            return None
        start = self._take(length)
        try:
            return str(self._data[start : start + length], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string is not valid UTF-8: {exc}") from None

    def bytes_(self, compact: bool = False, nullable: bool = False) -> bytes | None:
        length = self._length(compact, 4)
        if length == -1:
            if not nullable:
                raise ProtocolError("null in a non-nullable bytes field")
            return None
        start = self._take(length)
        return bytes(self._data[start : start + length])

    def array_length(self, compact: bool = False) -> int:
        """Element count of an array, -1 for null. Bounded by the bytes left (each element >= 1)."""
        length = self._length(compact, 4)
        if length > self._end - self.pos:
            raise ProtocolError(f"array of {length} elements cannot fit in {self.remaining} bytes")
        return length

    def int32_array(self, compact: bool = False, nullable: bool = False) -> list[int] | None:
        count = self.array_length(compact=compact)
        if count == -1:
            if not nullable:
                raise ProtocolError("null in a non-nullable array field")
            return None
        start = self._take(4 * count)
        return list(struct.unpack_from(f">{count}i", self._data, start))

    # -- tagged fields -------------------------------------------------------------------------
    def tagged_fields(self, count: int | None = None) -> list[tuple[int, memoryview]]:
        """All (tag, raw value) pairs of a TAGGED_FIELDS section (``count`` if already read)."""
        if count is None:
            count = self.uvarint()
        if count == 0:
            return []
        fields = []
        for _ in range(count):
            tag = self.uvarint()
            size = self.uvarint()
            fields.append((tag, self.raw(size)))
        return fields

    def skip_tagged_fields(self) -> None:
        count = self.uvarint()
        for _ in range(count):
            self.uvarint()
            self._take(self.uvarint())
