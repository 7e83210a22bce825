"""records.arrow: one normaliser for byte columns, and reading Arrow buffers (slices, nulls,
chunks and types) without pyarrow's pandas-importing conversions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafka_sink.records.arrow import (
    arrow_ints,
    as_binary_array,
    as_byte_column,
    binary_offsets,
    binary_scalar,
    int_column,
    valid_mask,
)
from kafka_sink.records.batch import as_bytes


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.int32(), pa.int64(), pa.uint16()])
def test_int_column_fills_nulls_and_honours_the_slice_offset(arrow_type: pa.DataType) -> None:
    rows = [1, None, 3, 4, None, 6, 7, 8, 9, 10, None, 12]
    sliced = pa.array(rows, arrow_type).slice(1, 10)
    out = int_column(sliced, -1, np.int64)
    assert out.tolist() == [-1 if r is None else r for r in rows[1:11]]
    assert valid_mask(sliced).tolist() == [r is not None for r in rows[1:11]]
    out[0] = 99  # a fresh array the caller may write into
    assert sliced[0].as_py() is None


def test_int_column_and_valid_mask_take_chunked_empty_and_null_typed_columns() -> None:
    chunked = pa.chunked_array([[1], [None, 2]], pa.int32())
    assert int_column(chunked, 5, np.int32).tolist() == [1, 5, 2]
    assert valid_mask(chunked).tolist() == [True, False, True]
    assert int_column(pa.array([], pa.int64()), 0, np.int64).tolist() == []
    assert int_column(pa.nulls(3), 7, np.int64).tolist() == [7, 7, 7]
    assert valid_mask(pa.nulls(2)).tolist() == [False, False]
    with pytest.raises(TypeError, match="integer column"):
        int_column(pa.array([1.5]), 0, np.int64)


def test_arrow_ints_shares_memory_and_binary_scalar_joins_like_pa_scalar() -> None:
    ints = np.arange(5, dtype=np.int32)
    wrapped = arrow_ints(ints)
    assert wrapped.type == pa.int32() and wrapped.to_pylist() == [0, 1, 2, 3, 4]
    assert arrow_ints(np.array([1, 2], dtype=np.int16)).type == pa.int64()
    for large in (False, True):
        scalar = binary_scalar(b"\x01ab", large)
        assert scalar.as_py() == b"\x01ab"
        assert scalar.type == (pa.large_binary() if large else pa.binary())


ROWS = [b"ab", None, b"", "d\u00e9".encode(), b"\x00\xff"]


def _forms() -> dict[str, object]:
    texts = [None if r is None else r.decode() for r in ROWS[:4]]
    return {
        "binary": pa.array(ROWS, pa.binary()),
        "large_binary": pa.array(ROWS, pa.large_binary()),
        "binary_view": pa.array(ROWS, pa.binary_view()),
        "dictionary": pa.array(ROWS, pa.binary()).dictionary_encode(),
        "chunked": pa.chunked_array([ROWS[:2], ROWS[2:]], pa.binary()),
        "sliced": pa.array([b"zz", *ROWS, b"yy"], pa.binary()).slice(1, len(ROWS)),
        "list": [ROWS[0], None, bytearray(ROWS[2]), memoryview(ROWS[3]), ROWS[4]],
        "string": pa.array(texts, pa.string()),
        "large_string": pa.array(texts, pa.large_string()),
        "string_view": pa.array(texts, pa.string_view()),
        "dictionary_string": pa.chunked_array([pa.array(texts, pa.string()).dictionary_encode()]),
    }


@pytest.mark.parametrize(("kind", "values"), _forms().items())
def test_as_binary_array_gives_the_same_bytes_for_every_form(kind: str, values: object) -> None:
    # ROWS[4] is not UTF-8, so the string forms hold the first four rows.
    expected = ROWS[:4] if "string" in kind else ROWS
    array = as_binary_array(values, "keys")
    assert pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)
    assert array.to_pylist() == expected
    column = as_byte_column(values)
    assert column.lengths.tolist() == [-1 if r is None else len(r) for r in expected]
    assert column.null_count == 1
    got = [
        None if n < 0 else column.data[column.offsets[i] : column.offsets[i + 1]].tobytes()
        for i, n in enumerate(column.lengths.tolist())
    ]
    assert got == expected


def test_as_binary_array_keeps_buffers_and_null_columns() -> None:
    strings = pa.array(["a", "bc"], pa.string())
    assert as_binary_array(strings).buffers()[2].address == strings.buffers()[2].address
    binary = pa.array([b"a"], pa.large_binary())
    assert as_binary_array(binary) is binary
    nulls = pa.nulls(3)
    assert as_binary_array(nulls) is nulls  # nothing allocated for an all-null column
    assert as_byte_column(nulls).lengths.tolist() == [-1, -1, -1]
    assert as_binary_array([]).to_pylist() == []


def test_binary_offsets_is_a_view_of_the_sliced_offsets() -> None:
    array = pa.array([b"a", b"bc", b"def"], pa.binary()).slice(1, 2)
    offsets = binary_offsets(array)
    assert offsets.tolist() == [1, 3, 6]
    assert not offsets.flags.owndata
    assert binary_offsets(pa.array([], pa.binary())).tolist() == [0]


def test_as_binary_array_names_the_column_it_refuses() -> None:
    with pytest.raises(TypeError, match=r"keys must be a binary or string column, got int64"):
        as_binary_array(pa.array([1, 2]), "keys")
    with pytest.raises(TypeError, match=r"values must be bytes, .* got int"):
        as_binary_array([b"a", 3], "values")
    with pytest.raises(TypeError):
        as_binary_array(7, "values")  # not a sequence at all


def test_as_bytes_is_the_one_rule_for_keys_values_and_headers() -> None:
    assert as_bytes("key", b"k") == b"k"
    assert as_bytes("key", bytearray(b"k")) == b"k"
    assert as_bytes("key", memoryview(b"k")) == b"k"
    assert as_bytes("key", "\u00e9") == "\u00e9".encode()
    with pytest.raises(TypeError, match="header 'h' must be bytes"):
        as_bytes("header 'h'", 1.5)
