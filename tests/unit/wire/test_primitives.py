"""Primitive encodings: varint edge values, compact/classic lengths, nulls, malformed input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from kafka_sink.errors import ProtocolError
from kafka_sink.wire.primitives import (
    Reader,
    Writer,
    decode_uvarint,
    decode_varint,
    encode_uvarint,
    encode_varint,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16384, "808001"),
        (2**32 - 1, "ffffffff0f"),
    ],
)
def test_uvarint_golden(value: int, golden: str) -> None:
    assert encode_uvarint(value).hex() == golden
    assert decode_uvarint(bytes.fromhex(golden)) == (value, len(golden) // 2)


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
        (2**63 - 1, "feffffffffffffffff01"),
        (-(2**63), "ffffffffffffffffff01"),
    ],
)
def test_zigzag_varint_golden(value: int, golden: str) -> None:
    assert encode_varint(value).hex() == golden
    assert decode_varint(bytes.fromhex(golden)) == (value, len(golden) // 2)


@given(INT64)
def test_varlong_round_trip_and_matches_kafka_python(value: int) -> None:
    ours = encode_varint(value)
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert ours == bytes(theirs)
    assert kp_decode_varint(ours, 0) == (value, len(ours))
    assert decode_varint(ours) == (value, len(ours))


@given(INT32)
def test_writer_varint_round_trip(value: int) -> None:
    w = Writer()
    w.varint(value)
    w.varlong(value)
    r = Reader(w.getvalue())
    assert r.varint() == value
    assert r.varlong() == value
    assert r.remaining == 0


@given(st.integers(0, 2**64 - 1))
def test_uvarint_round_trip(value: int) -> None:
    w = Writer()
    w.uvarint(value)
    assert Reader(w.getvalue()).uvarint() == value


def test_varint_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="out of range"):
        Writer().varint(2**31)
    with pytest.raises(ValueError, match="out of range"):
        encode_varint(2**63)
    with pytest.raises(ProtocolError, match="int32"):
        Reader(encode_varint(2**31)).varint()


def test_truncated_and_overlong_varints_raise_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        decode_uvarint(b"\x80\x80")
    with pytest.raises(ProtocolError, match="longer than 10"):
        decode_uvarint(b"\xff" * 11)


@given(
    st.one_of(st.none(), st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)),
    st.booleans(),
)
def test_string_round_trip(value: str | None, compact: bool) -> None:
    value_bytes = None if value is None else value.encode()
    w = Writer()
    w.string(value, compact=compact, nullable=True)
    data = w.getvalue()
    if value_bytes is not None:
        prefix = len(data) - len(value_bytes)
        assert data[prefix:] == value_bytes
    assert Reader(data).string(compact=compact, nullable=True) == value


@pytest.mark.parametrize(
    ("compact", "nullable", "value", "golden"),
    [
        (False, True, None, "ffff"),
        (True, True, None, "00"),
        (False, False, "", "0000"),
        (True, False, "", "01"),
        (False, False, "ab", "00026162"),
        (True, False, "ab", "036162"),
    ],
)
def test_string_golden(compact: bool, nullable: bool, value: str | None, golden: str) -> None:
    w = Writer()
    w.string(value, compact=compact, nullable=nullable)
    assert w.getvalue().hex() == golden


@pytest.mark.parametrize(
    ("compact", "value", "golden"),
    [
        (False, None, "ffffffff"),
        (True, None, "00"),
        (False, b"\x01", "0000000101"),
        (True, b"", "01"),
    ],
)
def test_bytes_golden(compact: bool, value: bytes | None, golden: str) -> None:
    w = Writer()
    w.bytes_(value, compact=compact, nullable=True)
    assert w.getvalue().hex() == golden
    assert Reader(bytes.fromhex(golden)).bytes_(compact=compact, nullable=True) == value


def test_null_in_non_nullable_fields_is_an_error() -> None:
    with pytest.raises(ProtocolError, match="non-nullable"):
        Writer().string(None)
    with pytest.raises(ProtocolError, match="non-nullable"):
        Reader(b"\xff\xff").string()
    with pytest.raises(ProtocolError, match="non-nullable"):
        Reader(b"\x00").bytes_(compact=True)


def test_large_byte_strings_are_kept_by_reference_until_getvalue() -> None:
    big = bytes(range(256)) * 64  # 16 KiB, above the reference threshold
    w = Writer()
    w.int16(7)
    w.bytes_(big)
    w.int8(1)
    assert len(w) == 2 + 4 + len(big) + 1
    assert w.getvalue() == b"\x00\x07" + len(big).to_bytes(4, "big") + big + b"\x01"
    framed = w.getvalue_framed()
    assert framed[:4] == (2 + 4 + len(big) + 1).to_bytes(4, "big")
    assert framed[4:] == w.getvalue()


def test_fixed_width_and_uuid() -> None:
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    w = Writer()
    w.int8(-1)
    w.uint16(65535)
    w.uint32(2**32 - 1)
    w.int64(-2)
    w.float64(1.5)
    w.boolean(True)
    w.uuid(u)
    w.uuid(None)
    r = Reader(memoryview(w.getvalue()))
    assert (r.int8(), r.uint16(), r.uint32(), r.int64(), r.float64(), r.boolean()) == (
        -1,
        65535,
        2**32 - 1,
        -2,
        1.5,
        True,
    )
    assert r.uuid() == u
    assert r.uuid().int == 0
    assert r.remaining == 0


def test_reader_accepts_any_nonzero_bool() -> None:
    assert Reader(b"\x02").boolean() is True


def test_truncated_input_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        Reader(b"\x00").int32()
    with pytest.raises(ProtocolError, match="truncated"):
        Reader(b"\x00\x05ab").string()
    with pytest.raises(ProtocolError, match="truncated"):
        Reader(b"\x00\x00\x00\x09abc").bytes_()
    with pytest.raises(ProtocolError, match="truncated"):
        Reader(b"\x05ab").string(compact=True)


def test_negative_length_and_huge_array_count_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="negative length"):
        Reader(b"\xff\xfe").string()
    with pytest.raises(ProtocolError, match="cannot fit"):
        Reader(b"\x7f\xff\xff\xff").array_length()


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        Reader(b"\x00\x01\xff").string()


def test_tagged_fields_written_in_order_and_skipped_when_unknown() -> None:
    w = Writer()
    w.tagged_fields([(0, b"\x01"), (5, b"\x02\x03")])
    data = w.getvalue()
    assert data.hex() == "02" + "000101" + "05020203"
    assert Reader(data).tagged_fields() == [(0, b"\x01"), (5, b"\x02\x03")]
    r = Reader(data + b"\x99")
    r.skip_tagged_fields()
    assert r.remaining == 1
    with pytest.raises(ProtocolError, match="ascending"):
        Writer().tagged_fields([(2, b""), (1, b"")])
