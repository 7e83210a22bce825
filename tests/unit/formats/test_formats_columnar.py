"""The numpy primitives the columnar encoders share, against plain-Python references."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.formats.columnar import (
    constant_pieces,
    group_pieces,
    join_pieces,
    length_prefixed,
    varints,
    zigzag_varints,
)
from kafka_sink.formats.wire_format import (
    frame,
    header,
    message_indexes,
    parse_header,
)
from kafka_sink.records.batch import encode_varint as zigzag_varint

INT64 = st.integers(-(2**63), 2**63 - 1)


def _reference_varint(z: int) -> bytes:
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(INT64, max_size=30))
def test_zigzag_varints_equal_the_scalar_and_reference_encodings(values: list[int]) -> None:
    column = zigzag_varints(np.array(values, dtype=np.int64)).to_pylist()
    expected = [_reference_varint(((v << 1) ^ (v >> 63)) & (2**64 - 1)) for v in values]
    assert column == expected
    assert column == [zigzag_varint(v) for v in values]


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_zigzag_varint_edges(value: int, encoded: bytes) -> None:
    assert zigzag_varint(value) == encoded
    assert zigzag_varints(np.array([value], dtype=np.int64)).to_pylist() == [encoded]


def test_unsigned_varints_use_up_to_ten_bytes() -> None:
    values = np.array([0, 127, 128, 2**64 - 1], dtype=np.uint64)
    assert varints(values).to_pylist() == [b"\x00", b"\x7f", b"\x80\x01", b"\xff" * 9 + b"\x01"]


def test_join_skips_null_pieces_and_takes_constants_and_any_binary_type() -> None:
    a = pa.array([b"a", None, b"c"], type=pa.binary())
    b = pa.array(["x", "y", None], type=pa.string())
    assert join_pieces([b"<", a, b, b">"], 3).to_pylist() == [b"<ax>", b"<y>", b"<c>"]
    assert join_pieces([b"k"], 2).to_pylist() == [b"k", b"k"]
    assert constant_pieces(b"", 2).to_pylist() == [b"", b""]


def test_join_keeps_trailing_rows_where_every_piece_is_null() -> None:
    a = pa.array([b"a", None, None], type=pa.large_binary())
    b = pa.array([b"b", None, None], type=pa.large_binary())
    assert join_pieces([a, b], 3).to_pylist() == [b"ab", b"", b""]


def test_group_concatenates_each_parents_items_without_copying() -> None:
    items = pa.array([b"1", b"22", b"", b"333"], type=pa.large_binary())
    grouped = group_pieces(items, np.array([0, 2, 2, 4]))
    assert grouped.to_pylist() == [b"122", b"", b"333"]
    assert grouped.buffers()[2].address == items.buffers()[2].address


def test_length_prefixed_keeps_nulls_and_counts_utf8_bytes() -> None:
    values = pa.array(["é", None, ""], type=pa.string())
    assert length_prefixed(values).to_pylist() == [b"\x04\xc3\xa9", None, b"\x00"]


def test_wire_format_header_and_protobuf_message_indexes() -> None:
    assert header(1) == b"\x00\x00\x00\x00\x01"
    assert frame(0x01020304, b"p") == b"\x00\x01\x02\x03\x04p"
    assert parse_header(frame(7, b"p")) == (7, 5)
    assert message_indexes([0]) == b"\x00"  # the first message's shortcut
    assert message_indexes([1]) == b"\x02\x02"
    assert message_indexes([0, 2]) == b"\x04\x00\x04"
    assert header(3, [0]) == b"\x00\x00\x00\x00\x03\x00"
    for bad in (-1, 2**31, True):
        with pytest.raises(ValueError, match="schema id"):
            header(bad)
    with pytest.raises(ValueError, match="wire format"):
        parse_header(b"\x01\x00\x00\x00\x01")
